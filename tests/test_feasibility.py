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
