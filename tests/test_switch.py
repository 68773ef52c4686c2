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


# --- every framework's rule (harness/sim/presets/switch.toml), worked by hand -------------

PAUSE, RESUME = 2.41 * 2**30, 5.32 * 2**30  # torch_memory_saver's measured copies, B/s


def test_the_tms_rates_are_the_published_gib_per_second() -> None:
    from harness.sim.switch import _data

    rates = _data()["rates"]
    assert rates["tms_pause_gbs"] * 1e9 == pytest.approx(PAUSE, rel=1e-5)
    assert rates["tms_resume_gbs"] * 1e9 == pytest.approx(RESUME, rel=1e-5)


def test_slime_carries_vimes_sleep_and_wake_and_reprices_its_bytes() -> None:
    """Published (vime#443): sleep 11.228 s, wake_up 3.773 s for Qwen3-0.6B on 1 L20
    (PCIe 4.0: 25 GB/s). There sleep pauses 12 x 0.6e9 = 7.2 GB at 2.41 GiB/s (2.7824 s),
    wake resumes it at 5.32 GiB/s (1.2604 s) and restores 2 x 0.6e9 bytes of parameters at
    25 GB/s (0.048 s): fixed parts 8.4456 s and 2.4646 s. The 7B on 8 H100s (51 GB/s), TP 2:
    pause 12P/8 = 11.424 GB (4.4147 s), resume it (1.9999 s), parameters 2P/2 = 7.616 GB
    (0.14933 s): 12.86033 s and 4.61378 s a step."""
    s = switch("slime", "qwen2.5-7b", "h100-sxm", 8, 1, trainer_shard=2)
    fixed_e = 11.228 - 7.2e9 / PAUSE
    fixed_t = 3.773 - 7.2e9 / RESUME - 1.2e9 / 25e9
    assert (fixed_e, fixed_t) == (pytest.approx(8.4456, abs=1e-4), pytest.approx(2.4646, abs=1e-4))
    assert s.fixed_s == pytest.approx(fixed_e) and s.trainer_fixed_s == pytest.approx(fixed_t)
    assert s.engine_bytes == pytest.approx(1.5 * P7)
    assert s.trainer_bytes == pytest.approx(1.5 * P7 + P7)
    assert s.engine_s == pytest.approx(fixed_e + 1.5 * P7 / PAUSE)
    assert s.trainer_s == pytest.approx(fixed_t + 1.5 * P7 / RESUME + P7 / 51e9)
    assert s.handover_s == pytest.approx((12.86033 + 4.61378) / 2, abs=1e-4)


def test_areal_is_its_fsdp_state_at_the_tms_rates() -> None:
    """AReaL, unpublished: bf16 parameters, bf16 gradients, AdamW's two bf16 moments, 8
    bytes a parameter over 8 GPUs = P = 7.616 GB, paused (2.9431 s) and resumed
    (1.3333 s): 2.1382 s a hand-over."""
    s = switch("areal", "qwen2.5-7b", "h100-sxm", 8, 1)
    assert s.engine_bytes == pytest.approx(P7) and s.trainer_bytes == pytest.approx(P7)
    assert s.fixed_s == 0.0 and s.trainer_fixed_s == 0.0
    assert s.handover_s == pytest.approx((P7 / PAUSE + P7 / RESUME) / 2)
    assert s.handover_s == pytest.approx(2.1382, abs=1e-4)


def test_skyrl_and_nemo_rl_are_their_bytes_over_pcie() -> None:
    """SkyRL: its engine sleeps at level 2 (nothing copied); fp32 parameters and AdamW's
    moments, 12P/8 = 11.424 GB, off and on: 0.224 s a side at 51 GB/s. NeMo-RL: vLLM at
    level 1 moves its bf16 weights (2P at TP 1) each way too: 2P + 12P/8 = 3.5P a side,
    26.656 GB, 0.52267 s."""
    sky = switch("skyrl", "qwen2.5-7b", "h100-sxm", 8, 1)
    assert sky.engine_bytes == pytest.approx(1.5 * P7) == sky.trainer_bytes
    assert sky.handover_s == pytest.approx(1.5 * P7 / 51e9)
    nemo = switch("nemo-rl", "qwen2.5-7b", "h100-sxm", 8, 1)
    assert nemo.engine_bytes == pytest.approx(3.5 * P7) == nemo.trainer_bytes
    assert nemo.handover_s == pytest.approx(0.52267, abs=1e-5)


def test_every_move_names_a_known_side_split_and_rate_and_every_rule_is_cited() -> None:
    from harness.sim import switch as sw

    for name in sw.frameworks():
        r = sw.rule(name)
        assert r["source"] and r["trainer"] in ("fsdp", "megatron"), name
        for move in r["moves"]:
            assert (move["side"], move["over"], move["rate"]) in [
                (a, b, c) for a in sw.SIDES for b in sw.OVER for c in sw.RATES], (name, move)


def test_every_system_names_its_framework_and_every_host_link_a_gpu_preset() -> None:
    """A new system must say whose switch it pays; a host link keyed by a name that is not a
    preset (the old "b200" beside the preset "b200-sxm") never applies."""
    from harness.sim import switch as sw
    from harness.sim.presets import load_hardware
    from systems import SYSTEMS

    named = sw._data()["systems"]
    assert set(SYSTEMS) <= set(named)
    assert {f for f in named.values() if f} <= set(sw.frameworks())
    for gpu in sw._data()["host_link"]:
        if gpu != "default_gbs":
            load_hardware(gpu)
    assert sw.host_link_gbs("b200-sxm") == 51.0 and sw.host_link_gbs("l20") == 25.0


def _sim(**kw: object) -> object:
    from types import SimpleNamespace

    base = {"model": "qwen2.5-7b", "rollout_gpu": "h20", "rollout_engines": 8,
            "rollout_tp": 2, "trainer_pp": 1, "trainer_ep": 1, "switch_s": None}
    return SimpleNamespace(**{**base, **kw})


def test_a_megatron_shard_spans_tp_x_pp_and_its_experts_ep_too() -> None:
    """Qwen3-30B-A3B: 30.532B parameters, 28.991B of them routed experts. PP 2, EP 4: a
    GPU holds 1.541/2 + 28.991/8 = 4.394375B, an effective shard of 6.94797 GPUs."""
    from harness.sim.switch import trainer_shard_of

    sim = _sim(model="qwen3-30b-a3b", trainer_pp=2, trainer_ep=4)
    assert trainer_shard_of("megatron", sim) == pytest.approx(30.532 / 4.394375)
    assert trainer_shard_of("fsdp", sim) == 16.0


def test_a_run_of_verl_takes_the_simulated_lead_out_and_is_left_with_its_bytes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The 7B on 16 H20s at TP 2 under verl's FSDP rule, the lead 100.53 s above the 74 s
    published: (2.5P + 2P) / 51 GB/s over two hand-overs = 0.33600 s."""
    from harness.sim import switch as sw

    monkeypatch.setattr(sw, "lead_s", lambda framework: 100.53)
    seconds, note = sw.handover_of(_sim(), "verl")
    assert seconds == round(4.5 * P7 / 51e9 / 2, 4) == 0.336
    assert "its bytes alone" in note


def test_the_lead_is_the_verl_calibrations_and_other_frameworks_have_none() -> None:
    from harness.sim import calibration
    from harness.sim.switch import lead_s

    assert lead_s("fsdp") == calibration.load("verl-async")["switch"]["fsdp"]
    assert lead_s("slime") == 0.0 and lead_s("skyrl") == 0.0


def test_the_run_keeps_its_own_a_live_calibrations_and_a_prior_where_no_colocated_mode(
        ) -> None:
    """sim.switch_s set, a calibration without [hardware] (a live machine's), a system
    whose framework runs apart (pipelinerl): the resolved value. Else the framework's."""
    from harness.sim.switch import handover_of, run_switch_s

    paper = {"hardware": {"model": "qwen3-1.7b"}}
    assert run_switch_s(_sim(switch_s=3.0), "slime", paper, 3.0) == (3.0, None)
    assert run_switch_s(_sim(), "slime", {"fixed": {}}, 4.0) == (4.0, None)
    assert run_switch_s(_sim(), "pipelinerl", paper, 10.0) == (10.0, None)
    seconds, note = run_switch_s(_sim(), "cgp", paper, 4.0)
    assert seconds == handover_of(_sim(), "slime")[0] and "slime's switch" in note


def test_a_verl_system_takes_its_calibrations_backend_and_the_others_keep_their_own() -> None:
    """RollPacker's veRL baseline trains with Megatron as RollPacker does (rollpacker.toml's
    trainer_framework): both pay verl's Megatron rule; slime's systems stay slime's."""
    from harness.sim.switch import framework_for, run_switch_s

    megatron = {"hardware": {"trainer_framework": "megatron"}}
    assert framework_for("verl", megatron) == "megatron" == framework_for("rollpacker", megatron)
    assert framework_for("verl", {"hardware": {"trainer_framework": "fsdp"}}) == "fsdp"
    assert framework_for("verl", {"hardware": {"trainer_framework": "deepspeed"}}) == "fsdp"
    assert framework_for("april", megatron) == "slime"
    assert "megatron's switch" in str(run_switch_s(_sim(), "verl", megatron, 4.0)[1])
