"""A cluster that cannot hold its model is refused with the cause in numbers
(harness.sim.feasibility), the same for run, sweep and plan."""

from __future__ import annotations

from harness.sim.feasibility import engine_problem, trainer_problem
from harness.sim.presets import load_hardware, load_model


def test_engine_weights_and_heads() -> None:
    m32, m17 = load_model("qwen2.5-32b"), load_model("qwen3-1.7b")
    rtx, h100 = load_hardware("rtx-4090"), load_hardware("h100-sxm")
    # 32.764e9 params x 2 bytes = 65.5 GB at TP 1; 24 GB x 0.85 = 20.4 GB: TP 4 (16.4 GB)
    problem = engine_problem(m32, "qwen2.5-32b", rtx, "rtx-4090", 1, 0.85)
    assert problem is not None and "65.5 GB per GPU at TP 1" in problem
    assert "20.4 GB" in problem and "use TP 4 or more" in problem
    assert engine_problem(m32, "qwen2.5-32b", rtx, "rtx-4090", 4, 0.85) is None
    assert engine_problem(m32, "qwen2.5-32b", h100, "h100-sxm", 1, 0.85) is None  # 65.5 < 68
    problem = engine_problem(m17, "qwen3-1.7b", h100, "h100-sxm", 3, 0.85)
    assert problem is not None and "does not divide qwen3-1.7b's 16 attention heads" in problem


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
    assert "batch 512 x context 1024 needs 77.3 GB" in err and "50.1 GB" in err


def test_more_engines_than_sequences_is_refused(tmp_path) -> None:
    # R 32 x K 8 = 256 sequences a round: the 257th replica never gets one
    code, _, err = _cli("run", "--out", str(tmp_path / "o"), "--set",
                        "sim.rollout_engines=100000")
    assert code == 2 and "at most 256 sequences" in err and "99,744 replicas" in err
    assert not (tmp_path / "o").exists()
