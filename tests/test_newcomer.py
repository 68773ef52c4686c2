"""What a newcomer's trial of malformed input found (issue #34, section 4), each worked
out by hand: the README's MoE FP8 `steps` example cut its message mid-word with no way
on; a bad `--model` file was blamed on `--calibration`; a profile file took a misspelt
key (`max_token`) and ran at the 8,192 cap, and a string where a number belongs failed
without naming the field; `metrics --steps` on an import printed nothing and exited 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app

PROFILES = Path(__file__).parents[1] / "workloads" / "profiles"


def one_line(argv: list[object]) -> str:
    result = CliRunner().invoke(app, [str(a) for a in argv])
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


# -- steps ------------------------------------------------------------------------------
def test_the_readmes_moe_fp8_example_says_why_whole_and_what_can_price_it() -> None:
    """aiconfigurator-core 0.12.0 holds SGLang's H100 MoE kernels as fp8_block only;
    vLLM's measure fp8: the database's key (200+ characters) was cut at 160, mid-word."""
    line = one_line(["steps", "--model", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--tp", "2",
                     "--ep", "2", "--precision", "fp8", "--batch", "1", "--context", "512"])
    assert line == (
        "error: --model: the kernel database cannot model Qwen3-30B-A3B on 2 x h100-sxm "
        "(TP 2, EP 2, fp8, KV bf16), sglang on h100_sxm (it measured no fp8 MoE kernels "
        "of this shape for sglang 0.5.14); --backend vllm or --precision bf16 can price "
        "it; --step-model roofline needs no measured kernels")
    done = CliRunner().invoke(app, ["steps", "--model", "qwen3-30b-a3b", "--gpu", "h100-sxm",
                                    "--tp", "2", "--ep", "2", "--precision", "fp8",
                                    "--backend", "vllm", "--batch", "1", "--context", "512",
                                    "--json"])
    assert done.exit_code == 0, done.output  # as the hint says


def test_an_estimator_error_is_shortened_at_a_word() -> None:
    from harness.sim.kernels.estimator import reason

    assert reason(ValueError("alpha beta gamma delta\nsecond line"), 16) == "alpha beta ..."
    assert reason(KeyError()) == "KeyError"


def test_a_bad_model_file_is_the_models_not_the_calibrations(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"hidden_size": 10\n')
    line = one_line(["steps", "--model", bad])
    assert line.startswith(f"error: --model: {bad} is not a JSON file"), line
    assert one_line(["steps", "--calibration", "nope"]).startswith(
        "error: --calibration: no calibration named 'nope'")


# -- profile files ----------------------------------------------------------------------
def profile(tmp_path: Path, old: str, new: str) -> str:
    text = (PROFILES / "lsat-ar.toml").read_text()
    assert old in text
    path = tmp_path / "mine.toml"
    path.write_text(text.replace(old, new))
    return str(path)


@pytest.mark.parametrize(("old", "new", "why"), [
    ("max_tokens = 8192", "max_tokens = 8192\nmax_token = 4096",
     "response.max_token: unknown field (known: mean_tokens, max_tokens, min_tokens, "
     "sigma_between, sigma_within, source)"),
    ('name = "lsat-ar"', 'name = "lsat-ar"\nmixtures = 2', "mixtures: unknown field"),
    ("[reward]", "[rewards]", "rewards: unknown field"),
    ("mean_tokens = 3450", 'mean_tokens = "lots"',
     "response.mean_tokens: expected a number, got 'lots'"),
    ("mean_tokens = 3450", 'mean_tokens = "3450"',
     "response.mean_tokens: expected a number, got '3450'"),
    ("max_tokens = 8192", "max_tokens = 8192.5",
     "response.max_tokens: expected an integer, got 8192.5"),
    ("pass_rate = 0.35", "pass_rate = true", "reward.pass_rate: expected a number, got True"),
    ('summary = "', 'summary = 3 #', "summary: expected a string, got 3"),
])
def test_a_profile_file_refuses_unknown_keys_and_names_a_mistyped_field(
        tmp_path: Path, old: str, new: str, why: str) -> None:
    from workloads.profile import load_profile

    path = profile(tmp_path, old, new)
    with pytest.raises(ValueError) as err:
        load_profile(f"profile:{path}")
    assert str(err.value).startswith(f"{path}: {why}"), str(err.value)
    line = one_line(["run", "--workload", f"profile:{path}", "--out", tmp_path / "o"])
    assert why in line and not (tmp_path / "o").exists()


def test_a_mixture_refuses_unknown_keys_too(tmp_path: Path) -> None:
    from workloads.profile import load_profile

    mix = tmp_path / "mix.toml"
    mix.write_text('name = "m"\nsummary = "s"\n[mixture]\ncomponents = ["sci-jl"]\n'
                   'weights = [1]\nweight = [2]\n')
    with pytest.raises(ValueError, match=r"mix.toml: mixture.weight: unknown field \(known: "
                                         r"components, weights, length_scale, source\)"):
        load_profile(str(mix))


def test_every_shipped_profile_still_loads() -> None:
    from workloads.profile import load_profile, profile_names

    assert all(load_profile(name).name == name for name in profile_names())


# -- metrics --steps on an import -------------------------------------------------------
def test_metrics_steps_of_an_import_without_steps_says_so(tmp_path: Path) -> None:
    """PipelineRL's stream records no optimizer step: --steps had no row to print and
    exited 0 with nothing on screen."""
    from test_import import pipelinerl_run

    from harness.imports import read, to_trace, write

    pipelinerl_run(tmp_path)
    trace = tmp_path / "t.jsonl"
    write(to_trace(read("pipelinerl", [tmp_path])), trace)
    assert one_line(["metrics", "--steps", trace]) == (
        f"error: {trace}: no optimizer steps (pipelinerl's logs record none); drop --steps "
        "for its rounds")
    golden = Path(__file__).parent / "golden" / "cgp.jsonl"
    both = CliRunner().invoke(app, ["metrics", "--steps", "--json", str(golden), str(trace)])
    assert both.exit_code == 0, both.output  # the steps there are, and the gap said
    assert " ".join(both.stderr.split()) == (  # wrapped at 100 columns
        f"warning: {trace}: no optimizer steps (pipelinerl's logs record none); drop --steps "
        "for its rounds")
    rows = json.loads(both.stdout)
    assert rows and {r["trace"] for r in rows} == {str(golden)}
