"""Small things a new user met (findings 12, D and N): `steps --json` rounded what it
calls full precision, error lines ran past 100 columns or showed a value other than the
one typed, `--set` type errors did not say `--set`, import notes ran to 170 columns, and
a zstd trace cut inside its first block was called empty."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app

FIXTURES = Path(__file__).parent / "fixtures"


def invoke(*args: str) -> tuple[int, str, str]:
    done = CliRunner().invoke(app, list(args))
    return done.exit_code, done.stdout, done.stderr


def test_steps_json_is_full_precision() -> None:
    code, out, err = invoke("steps", "--spec", "mtp", "--batch", "1", "--context", "512",
                            "--json")
    assert code == 0, err
    row = json.loads(out)[0]
    assert row["spec_tok"] == pytest.approx((1 - 0.8 ** 4) / 0.2, rel=1e-12)  # 2.952
    # it printed 4-decimal ms and a 3-decimal speedup: 2.952 x 4.2195 / 6.8612 = 1.8154
    assert row["speedup"] == pytest.approx(
        row["spec_tok"] * row["decode_ms"] / row["spec_ms"], rel=1e-12)


@pytest.mark.parametrize(("args", "line"), [
    (["--system", "sortedrl", "--set", "roll_flash.async_generation_ratio=2"],
     "error: --set roll_flash.async_generation_ratio=2: sortedrl does not read it (read by "
     "roll-flash)"),  # was 137 columns, with 2.0 for the 2 typed
    (["--system", "april", "-U", "4"],
     "error: --update-groups 4: april does not read it (a round's R=32 groups are one "
     "optimizer step)"),
    (["--system", "slime", "--set", "sim.spec_tokens=abc"],
     "error: --set sim.spec_tokens: expected int, got 'abc'"),
    (["--system", "roll-flash", "--set", "roll_flash.async_generation_ratio=nan"],
     "error: --set roll_flash.async_generation_ratio: expected a finite number, got nan"),
    (["--system", "slime", "--set", "sim.spec_token=5"],
     "error: --set sim.spec_token: unknown field (did you mean sim.spec_tokens?)"),
])
def test_run_errors_name_the_option_as_typed_in_100_columns(tmp_path: Path, args: list[str],
                                                            line: str) -> None:
    code, _, err = invoke("run", *args, "--out", str(tmp_path / "o"))
    assert code == 2 and err.splitlines() == [line] and len(line) <= 100, err


def test_import_notes_are_wrapped_at_100_columns(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a short --out: the lines that name it stay short
    code, out, err = invoke("import", "roll", str(FIXTURES / "roll"), "--out", "r.jsonl")
    assert code == 0, err
    assert max(map(len, out.splitlines())) <= 100
    assert "note: a request for several responses" in out and "lacks: token counts" in out


def test_a_zstd_trace_cut_in_its_first_block_is_not_called_empty(tmp_path: Path) -> None:
    import zstandard

    lines = (Path(__file__).parent / "golden" / "slime.jsonl").read_bytes()
    whole = zstandard.ZstdCompressor().compress(lines)
    path = tmp_path / "cut.jsonl.zst"
    path.write_bytes(whole[: len(whole) // 2])
    code, _, err = invoke("metrics", str(path))
    assert code == 2
    assert err == (f"error: {path}: nothing decodable: a zstd trace cut inside its first "
                   f"block (a run killed before it flushed one?)\n")


@pytest.mark.parametrize(("args", "file", "opening"), [
    # a default nobody set: named as the default, not as a --set never typed
    ([], '[sim]\nmodel = "qwen3-235b-a22b"\nrollout_gpu = "a100-40gb-pcie"\n',
     "error: sim.rollout_tp=2 (the default): qwen3-235b-a22b's bf16 weights take"),
    # the file's own field, also where the check says --set FIELD=VALUE
    ([], '[sim]\nrollout_tp = 2\nmodel = "qwen3-235b-a22b"\n',
     "error: --config c.toml: sim.rollout_tp = 2: qwen3-235b-a22b's"),
    (["--gpu", "h100"], None, "error: --gpu h100: unknown hardware preset 'h100'"),
])
def test_an_error_names_what_the_user_gave_for_its_field(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], file: str | None,
        opening: str) -> None:
    """`[sim] model = ...` in a file said `--set sim.rollout_tp=2`, an option never typed,
    and `--gpu h100` said `sim.rollout_gpu`."""
    monkeypatch.chdir(tmp_path)
    if file is not None:
        (tmp_path / "c.toml").write_text(file)
        args = [*args, "--config", "c.toml"]
    code, _, err = invoke("run", *args, "--out", "o")
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith(opening), err
