"""A cluster that cannot hold its model is refused with the cause in numbers
(harness.sim.feasibility), the same for run, sweep and plan."""

from __future__ import annotations

from harness.sim.engine_spec import resolve_engine
from harness.sim.feasibility import engine_problem, trainer_problem
from harness.sim.presets import load_hardware, load_model


def test_engine_weights_and_heads() -> None:
    def problem(model: str, gpu: str, tp: int, **layout: object) -> str | None:
        return engine_problem(resolve_engine(model, gpu, "sglang", tp, **layout), 0.85)

    # 32.764e9 params x 2 bytes = 65.5 GB at TP 1; 24 GB x 0.85 = 20.4 GB: TP 4 (16.4 GB)
    said = problem("qwen2.5-32b", "rtx-4090", 1)
    assert said is not None and "65.5 GB per GPU at TP 1" in said
    assert "20.4 GB" in said and "use TP 4 or more" in said
    assert problem("qwen2.5-32b", "rtx-4090", 4) is None
    assert problem("qwen2.5-32b", "h100-sxm", 1) is None  # 65.5 < 68
    said = problem("qwen3-1.7b", "h100-sxm", 3)
    assert said is not None and "does not divide qwen3-1.7b's 16 attention heads" in said


def test_a_moe_holds_every_expert_at_its_precision() -> None:
    def problem(tp: int, precision: str) -> str | None:
        spec = resolve_engine("qwen3-235b-a22b", "h100-sxm", "sglang", tp, ep=tp,
                              precision=precision)
        return engine_problem(spec, 0.85)

    # 235.094e9 params: bf16 470.2 GB, /4 = 117.5 GB > 80 x 0.85 = 68 GB: TP 8 (58.8 GB);
    # fp8 235.1 GB, /4 = 58.8 GB fits.
    said = problem(4, "bf16")
    assert said is not None and "bf16 weights take 117.5 GB per GPU at TP 4" in said
    assert "use TP 8 or more" in said
    assert problem(8, "bf16") is None and problem(4, "fp8") is None
    said = problem(2, "fp8")
    assert said is not None and "fp8 weights take 117.5 GB per GPU at TP 2" in said


def test_trainer_state_sharded_over_its_gpus() -> None:
    m32, rtx = load_model("qwen2.5-32b"), load_hardware("rtx-4090")
    # 16 bytes x 32.764e9 = 524.2 GB; 0.8 x 24 GB = 19.2 GB each: 28 GPUs (27.3 rounded up)
    problem = trainer_problem(m32, "qwen2.5-32b", rtx, "rtx-4090", 1)
    assert problem is not None and "524.2 GB on each of 1" in problem
    assert "use 28 or more" in problem
    assert trainer_problem(m32, "qwen2.5-32b", rtx, "rtx-4090", 28) is None
    assert trainer_problem(m32, "qwen2.5-32b", rtx, "rtx-4090", 27) is not None


def _cli(*args: str) -> tuple[int, str, str]:
    from typer.testing import CliRunner

    from harness.cli.app import app

    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_steps_refuses_a_context_no_engine_holds_and_flags_a_batch_too_large() -> None:
    # qwen3-8b: 36 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 147,456 B a token.
    # One h100-sxm at TP 1: 80 GB x 0.85 - 16.382 GB weights - 1.5 GB reserve
    # = 50.118 GB = 339,884 tokens.
    code, _, err = _cli("steps", "--model", "qwen3-8b", "--gpu", "h100-sxm", "--tp", "1",
                        "--context", "100000000", "--batch", "1")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "one sequence needs 14,745.6 GB of KV cache" in err and "339,884 tokens" in err
    # 256 x 1024 = 262,144 tokens fit; 512 x 1024 = 524,288 (77.3 GB) do not: flagged
    code, out, err = _cli("steps", "--model", "qwen3-8b", "--gpu", "h100-sxm", "--tp", "1",
                          "--context", "1024", "--batch", "256,512")
    assert code == 0 and "512" in out
    assert err.count("warning:") == 1 and "1 step(s) need more KV cache" in err
    flat = " ".join(err.split())  # the warning is wrapped to 100 columns
    assert "batch 512 x context 1024 needs 77.3 GB" in flat and "50.1 GB" in flat


def test_more_engines_than_sequences_is_refused(tmp_path) -> None:
    # R 32 x K 8 = 256 sequences a round: the 257th replica never gets one
    code, _, err = _cli("run", "--out", str(tmp_path / "o"), "--set",
                        "sim.rollout_engines=100000")
    assert code == 2 and "only 256 sequences a round" in err and "use at most 256" in err
    assert not (tmp_path / "o").exists()
