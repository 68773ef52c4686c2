"""`run` refuses an engine the kernel database cannot price in one line that names what
prices it instead, as `steps` does (issue #35, section 4): DeepSeek-V3 in BF16 at vLLM TP 32
on H100 was refused with the database's reason alone. vLLM 0.24.0's H100 tables hold no
BF16 MoE kernels of that shape; SGLang's do, and the roofline needs no table."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from harness.cli.app import app

ARGS = ["--system", "verl", "--workload", "sci-jl", "-R", "8", "--rounds", "1",
        "--set", "sim.model=deepseek-v3", "--set", "sim.rollout_gpu=h100-sxm",
        "--set", "sim.rollout_tp=32", "--set", "sim.engine_backend=vllm",
        "--set", "sim.trainer_gpu=h100-sxm", "--set", "sim.trainer_gpus=256",
        "--set", "sim.trainer_ep=16", "--set", "sim.trainer_pp=16"]


def test_run_names_the_way_on_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "--out", str(out), *ARGS])
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert lines == [
        "error: sim.model: the kernel database cannot model DeepSeek-V3 on 32 x h100-sxm "
        "(TP 32, bf16, KV bf16), vllm on h100_sxm (it measured no bfloat16 MoE kernels of "
        "this shape for vllm 0.24.0); --set sim.engine_backend=sglang can price it; "
        "--set sim.step_model=roofline needs no measured kernels"], result.stderr
    assert not out.exists()  # refused before anything is written


def test_the_way_it_names_runs(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["run", "--out", str(tmp_path / "r"), *ARGS,
                                      "--set", "sim.step_model=roofline", "--json"])
    assert result.exit_code == 0, (result.output, result.exception)
    assert (tmp_path / "r" / "trace.jsonl.zst").exists()


def test_steps_says_it_in_its_own_flags() -> None:
    result = CliRunner().invoke(app, ["steps", "--model", "deepseek-v3", "--gpu", "h100-sxm",
                                      "--tp", "32", "--backend", "vllm", "--batch", "1",
                                      "--context", "512"])
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stderr.strip().endswith(
        "for vllm 0.24.0); --backend sglang can price it; --step-model roofline needs no "
        "measured kernels"), result.stderr
