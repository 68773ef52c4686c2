"""Errors and warnings a new user met over 100 columns (findings-13, items 9 and 20) fit
them now: a refusal stays one line, shortened (a long list of known names points to the
command that lists them, a source's reason to `rolloutbench systems`); a warning is
wrapped. Each was one line of 139-376 columns before."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_staleness_forms import study
from typer.testing import CliRunner

from harness.cli.app import app
from harness.core.config import RunConfig
from harness.run.execute import execute


def said(args: list[str], code: int) -> list[str]:
    done = CliRunner().invoke(app, args)
    assert done.exit_code == code, done.output
    lines = done.stderr.splitlines()
    assert lines and max(len(line) for line in lines) <= 100, lines
    return lines


def joined(lines: list[str]) -> str:
    """A wrapped text as one line again (its continuations' indent dropped)."""
    return " ".join(" ".join(lines).split())


@pytest.mark.parametrize(("args", "line"), [
    # 286 columns: every system's name
    (["staleness-forms", "study", "--systems", "nosuch"],
     "error: --systems: unknown system 'nosuch'; `rolloutbench systems` lists the 23 known"),
    (["counterfactual", "t.jsonl", "--systems", "nosuch", "-o", "cf"],  # 285
     "error: --systems: unknown system 'nosuch'; `rolloutbench systems` lists the 23 known"),
    (["plan", "--model", "qwen3-1.7b", "--gpus", "8", "--gpu", "h100-sxm", "--workload",
      "lsat-ar", "--systems", "nosuch", "--out", "p"],  # 260
     "error: --systems: unknown system 'nosuch'; `rolloutbench systems` lists the 23 known"),
    (["run", "--set", "nosuch=2", "--out", "r"],  # 573: every top-level field's name
     "error: --set nosuch: unknown field (`rolloutbench config show` lists the 39 known)"),
    (["run", "--system", "nosuch", "--out", "r"],
     "error: --system: unknown system 'nosuch'; `rolloutbench systems` lists the 23 known"),
    (["run", "--workload", "nosuch", "--out", "r"],  # 376
     "error: --workload: unknown workload 'nosuch'; `rolloutbench workloads` lists the 24 "
     "known"),
    (["reproduce", "nosuch"],  # 148
     "error: unknown reproduction 'nosuch'; `rolloutbench reproduce --help` lists the 10 "
     "known"),
    (["whatif", "nosuch"],  # 139
     "error: unknown what-if study 'nosuch'; `rolloutbench whatif --help` lists the 7 known"),
    # 182: Laminar's sentence and its citation, now under `rolloutbench systems`
    (["run", "--system", "laminar", "--set", "sim.placement=colocated", "--out", "r"],
     "error: --set sim.placement=colocated: laminar is disaggregated only (why: rolloutbench "
     "systems)"),
    # 154: the replicas left idle counted and the cap said twice
    (["run", "--set", "sim.rollout_engines=100000", "--out", "r"],
     "error: --set sim.rollout_engines=100000: only 256 sequences a round (R 32 x K 8): use at "
     "most 256"),
    # 122 with a typical path: the path said twice
    (["model", "warmup", "/home/user/project/runs/my-model"],
     "error: MODEL_DIR /home/user/project/runs/my-model: no such folder (see rolloutbench model "
     "init)"),
    # about 200 with the 11 default systems named
    (["staleness-forms", "study", "--split", "9+9"],
     "error: study: no run of the 11 systems on split 9+9 has a steady window"),
])
def test_a_refusal_is_one_line_within_100_columns(args: list[str], line: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    study(tmp_path / "study")
    assert said(args, 2) == [line]


def test_a_cut_trace_s_warning_is_wrapped(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """metrics, compare and timeline said "incomplete trace (...)" in one line of about
    170 columns; `check`'s was wrapped already. The path is the one a user typed."""
    monkeypatch.chdir(tmp_path)
    cfg = RunConfig(system="slime", workload="sci-jl", groups=4, group_size=2, rounds=2)
    whole = Path("runs/slime-sci-jl-4-groups/trace.jsonl")
    execute(cfg.validate(), whole)
    cut = whole.with_name("cut.jsonl")
    lines = whole.read_text().splitlines()
    cut.write_text("\n".join(lines[: len(lines) * 3 // 4]) + "\n")
    text = (f"warning: {cut}: incomplete trace (no run_end (an interrupted run?)); round(s) "
            f"1 did not finish: figures left out")
    assert len(text) > 100
    assert joined(said(["metrics", str(cut)], 0)) == text
    assert joined(said(["timeline", str(cut), "-o", "t.json"], 0)) == (
        f"warning: {cut}: incomplete trace (no run_end (an interrupted run?)); drawn as far "
        f"as it goes")
    compared = said(["compare", str(whole), str(cut)], 0)
    assert joined(compared).startswith(
        f"warning: {cut}: incomplete trace (no run_end (an interrupted run?)); its rows as "
        f"far as it goes")


def test_ray_address_refusals_fit_100_columns() -> None:
    """A closed port, a silent one and one that speaks no gRPC: each line, with a typical
    address, fits (they were 117-130 columns); ROLLOUTBENCH_RAY_TIMEOUT stays named."""
    import socket
    import threading

    from harness.core.config import ConfigError
    from harness.shared.ray_connect import check_address

    def refusal(address: str) -> str:
        with pytest.raises(ConfigError) as err:
            check_address(address, 0.5)
        line = "error: " + str(err.value).replace(address, "ray-head.local:6379")
        assert len(line) <= 100 and "\n" not in line, line
        return line

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{free.getsockname()[1]}"
    assert "(`ray start --head` there, or 'local')" in refusal(closed)
    with socket.socket() as silent, socket.socket() as junk:
        for s in (silent, junk):
            s.bind(("127.0.0.1", 0))
            s.listen()
        assert "open, silent 0.5 s (ROLLOUTBENCH_RAY_TIMEOUT sets it)" in refusal(
            f"127.0.0.1:{silent.getsockname()[1]}")

        def answer() -> None:
            conn, _ = junk.accept()
            with conn:
                conn.recv(64)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        threading.Thread(target=answer, daemon=True).start()
        assert "not a Ray cluster (no gRPC); give its GCS port (6379?)" in refusal(
            f"127.0.0.1:{junk.getsockname()[1]}")
