"""A refusal names the option that caused it, in the command's own words (a new user's
trial: a KV cache given outright was blamed on sim.mem_fraction, a TP that does not
divide the heads on --model, and `steps`' unknown presets named no option at all, where
`run` and `plan` name theirs; a memory share set too small for the weights was blamed on
the default TP)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app

CASES = {
    "a KV cache given outright": (
        ["run", "--system", "slime", "--workload", "sci-xw", "-R", "8", "--rounds", "1",
         "--set", "sim.kv_cache_tokens=100", "--out", "{tmp}/o"],
        "error: --set sim.kv_cache_tokens: 100 tokens cannot hold one sequence of "),
    "a memory share too small for weights that fit at the default": (
        ["run", "--system", "slime", "--workload", "sci-xw", "-R", "8", "--rounds", "1",
         "--set", "sim.mem_fraction=0.01", "--out", "{tmp}/o"],
        "error: --set sim.mem_fraction=0.01: qwen3-1.7b's bf16 weights take 1.7 GB per GPU"),
    "weights too large at the default memory share": (
        ["run", "--system", "slime", "--workload", "sci-xw", "-R", "8", "--rounds", "1",
         "--set", "sim.model=qwen3-235b-a22b", "--out", "{tmp}/o"],
        "error: sim.rollout_tp=2 (the default): qwen3-235b-a22b's bf16 weights take"),
    "steps: a TP that does not divide the heads": (
        ["steps", "--tp", "3"],
        "error: --tp 3: TP 3 does not divide qwen3-1.7b's 16 attention heads"),
    "steps: an unknown model": (
        ["steps", "--model", "qwen3-8bb"],
        "error: --model qwen3-8bb: unknown model preset 'qwen3-8bb'; did you mean 'qwen3-8b'?"),
    "steps: an unknown GPU": (
        ["steps", "--gpu", "h200"],
        "error: --gpu h200: unknown hardware preset 'h200'; did you mean 'h200-sxm'?"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_refusal_names_its_cause(tmp_path: Path, case: str) -> None:
    args, said = CASES[case]
    out = CliRunner().invoke(app, [a.format(tmp=tmp_path) for a in args])
    assert out.exit_code == 2, out.output
    assert out.stderr.startswith(said) and out.stderr.count("\n") == 1, out.stderr
    assert not (tmp_path / "o").exists()


def test_a_tp_that_does_not_divide_the_heads_fits_100_columns(tmp_path: Path) -> None:
    """It was 136 columns (`run --set sim.rollout_tp=3`): the TPs that divide, named."""
    out = CliRunner().invoke(app, ["run", "--set", "sim.rollout_tp=3", "--out",
                                   str(tmp_path / "o")])
    assert out.exit_code == 2
    assert out.stderr == ("error: --set sim.rollout_tp=3: TP 3 does not divide qwen3-1.7b's 16 "
                          "attention heads; 1, 2, 4, 8 do\n")
    assert len(out.stderr.rstrip("\n")) <= 100
