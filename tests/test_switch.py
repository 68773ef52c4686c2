"""The switch between engine and trainer (harness/sim/switch.py), against values worked
out by hand from its sources."""

from __future__ import annotations

import pytest

from harness.sim.presets import load_model
from harness.sim.switch import host_bytes, switch

P7 = load_model("qwen2.5-7b").params_b * 1e9  # 7.616e9


def test_the_published_fsdp2_switch_is_gen_less_generate_sequences() -> None:
    """verl's one-step-off README: 321 - 247 = 74 s a step under FSDP2 on 16 H20s (TP 2).
    A GPU moves 2 x 2P / 2 (the engine's bf16 shard out and back) + 2 x 4P / 16 (the fp32
    FSDP shard on and off) = 2.5P = 19.04 GB in the engine's side, at 51 GB/s 0.3733 s; the
    rest, 73.6267 s, is the fixed part. Trainer side: parameters on and off twice, 2 x 2 x
    4P / 16 = P, Adam's moments on and off, 2 x 8P / 16 = P: 2P = 15.232 GB, 0.29867 s."""
    s = switch("fsdp", "qwen2.5-7b", "h20", 16, 2)
    assert s.engine_bytes == pytest.approx(2.5 * P7)
    assert s.trainer_bytes == pytest.approx(2 * P7)
    assert s.fixed_s == pytest.approx(74 - 2.5 * P7 / 51e9)
    assert s.engine_s == pytest.approx(74.0)
    assert s.trainer_s == pytest.approx(2 * P7 / 51e9)
    assert s.handover_s == pytest.approx((74 + 2 * P7 / 51e9) / 2)  # 37.1493
    assert s.handover_s == pytest.approx(37.1493, abs=1e-4)


def test_the_published_megatron_switch_and_its_bytes() -> None:
    """207 - 162 = 45 s under Megatron (TP 2 x PP 2: a parameter shard on 4 GPUs). Engine
    side: 2 x 2P / 2 + 2 x 2P / 4 = 3P; trainer side: bf16 parameters on and off twice
    (2 x 2 x 2P / 4 = 2P), fp32 gradients on and off (2 x 4P / 4 = 2P), the distributed
    optimizer's 12 bytes over all 16 GPUs (2 x 12P / 16 = 1.5P): 5.5P."""
    engine, trainer = host_bytes("megatron", "qwen2.5-7b", 2, 4, 16)
    assert engine == pytest.approx(3 * P7) and trainer == pytest.approx(5.5 * P7)
    s = switch("megatron", "qwen2.5-7b", "h20", 16, 2, 4)
    assert s.engine_s == pytest.approx(45.0)
    assert s.handover_s == pytest.approx((45 + 5.5 * P7 / 51e9) / 2)


def test_the_fixed_part_is_carried_and_the_bytes_repriced() -> None:
    """The 7B on 128 H20s at TP 4: engine side 2 x 2P / 4 + 2 x 4P / 128 = 1.0625P."""
    s = switch("fsdp", "qwen2.5-7b", "h20", 128, 4)
    assert s.engine_bytes == pytest.approx(1.0625 * P7)
    assert s.fixed_s == pytest.approx(74 - 2.5 * P7 / 51e9)
    assert s.engine_s == pytest.approx(s.fixed_s + 1.0625 * P7 / 51e9)


def test_a_rank_imbalance_priced_elsewhere_comes_out_of_the_published_seconds() -> None:
    base = switch("fsdp", "qwen2.5-7b", "h20", 16, 2)
    less = switch("fsdp", "qwen2.5-7b", "h20", 16, 2, imbalance_s=20.0)
    assert base.engine_s - less.engine_s == pytest.approx(20.0)


def test_a_framework_without_a_measurement_is_its_bytes_alone_and_an_unknown_one_refused(
        ) -> None:
    import harness.sim.switch as sw

    s = sw.Switch(2.5 * P7, 2 * P7, 25.0, 0.0)
    assert s.step_s == pytest.approx(4.5 * P7 / 25e9)
    with pytest.raises(ValueError, match="framework 'deepspeed'"):
        switch("deepspeed", "qwen2.5-7b", "h20", 16, 2)


def test_a_lead_above_the_published_seconds_leaves_the_bytes_alone() -> None:
    """One-step-off FSDP2: a slowest replica 100.53 s ahead of the mean (the simulator's
    static split at the fitted length) is more than the 74 s published: no fixed part is
    left, the engine's side is its bytes, 2.5P / 51 GB/s = 0.3733 s."""
    s = switch("fsdp", "qwen2.5-7b", "h20", 16, 2, imbalance_s=100.53)
    assert s.fixed_s == 0.0
    assert s.engine_s == pytest.approx(2.5 * P7 / 51e9)
