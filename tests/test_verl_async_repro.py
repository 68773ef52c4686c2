"""verl's fully-async reproduction: its setup, what it reads off a trace, its claims,
and the trainer without the old-log-prob forward, each against values worked out by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from harness.sim.perf import TrainModel, all_to_all_bytes_per_token
from harness.sim.presets import load_hardware, load_model
from harness.studies.reproduce.verl_async import claims, runs


def test_without_the_recompute_forward_a_token_costs_three_passes_not_four() -> None:
    hw, model = load_hardware("h20"), load_model("qwen2.5-7b")
    full = TrainModel.build(hw, model, 16, 0.5, 0.0)
    lean = TrainModel.build(hw, model, 16, 0.5, 0.0, forwards=0)
    assert full.flops_per_token == pytest.approx(8 * model.params_b * 1e9, rel=0.05)
    assert lean.flops_per_token / full.flops_per_token == pytest.approx(0.75)
    assert lean.attn_coeff / full.attn_coeff == pytest.approx(0.75)
    # a micro-batch of one 10,000-token sequence: 3/4 of the time (no fixed cost here)
    assert lean.micro_time([10_000]) / full.micro_time([10_000]) == pytest.approx(0.75)


def test_without_the_recompute_forward_a_moe_token_makes_four_all_to_alls_not_six() -> None:
    moe = load_model("qwen3-30b-a3b")
    six = all_to_all_bytes_per_token(moe, 8)
    four = all_to_all_bytes_per_token(moe, 8, forwards=0)
    assert six > 0 and four / six == pytest.approx(4 / 6)


def test_the_runs_are_the_readmes_setup() -> None:
    by = {r.label: r for r in runs.runs(0)}
    colo, full = by["colocate 32"].cfg, by["fully async 16:16"].cfg
    assert (colo.sim.placement, colo.sim.rollout_engines, colo.sim.rollout_tp) == (
        "colocated", 8, 4)
    assert (full.sim.placement, full.sim.rollout_engines, full.sim.trainer_gpus) == (
        "disaggregated", 4, 16)
    assert (colo.sim.log_prob_forwards, full.sim.log_prob_forwards) == (1, 0)
    assert (colo.groups, colo.group_size, colo.update_groups) == (512, 16, 32)
    assert full.max_response_tokens == 28 * 1024
    v = full.verl_async
    assert (v.staleness_threshold, v.trigger_parameter_sync_step, v.require_batches,
            v.partial_rollout) == (0.5, 4, 4, True)
    assert by["fully async 16:16 s=0.1"].cfg.verl_async.staleness_threshold == 0.1
    # every run syncs after 512 prompts (README.md:123-124), the colocated step's batch
    for run in by.values():
        if run.cfg.system == "verl-fully-async":
            w = run.cfg.verl_async
            batch = w.trigger_parameter_sync_step * w.require_batches * run.cfg.update_groups
            assert batch == run.cfg.groups == 512, run.label
    moe = by["30B fully async 96:32"].cfg
    assert (moe.sim.trainer_gpus, moe.sim.rollout_engines, moe.sim.trainer_ep) == (32, 24, 8)
    assert (moe.update_groups, moe.max_response_tokens, moe.sim.log_prob_forwards) == (
        128, 8192, 1)  # mini-batch 128, 8k, the KL reference's forward
    osp = by["one-step-off 4:12 FSDP2"].cfg
    assert (osp.sim.rollout_engines, osp.sim.rollout_tp, osp.sim.trainer_gpus) == (2, 2, 12)
    assert (osp.group_size, osp.max_response_tokens) == (12, 20480)


def test_the_profile_has_the_fitted_mean_and_the_cap(tmp_path) -> None:
    from workloads.profile import load_profile

    name = runs.workload(2738, tmp_path, 28672)
    p = load_profile(name)
    base = load_profile("dapo-math-17k")
    assert (p.mean_tokens, p.max_tokens) == (2738, 28672)
    assert (p.sigma_between, p.sigma_within, p.prompt_mu_log) == (
        base.sigma_between, base.sigma_within, base.prompt_mu_log)
    assert runs.workload(2738, tmp_path, 28672) == name  # written once, the same text


def _ev(t: float, ev: str, **kw: object) -> dict:
    return {"t": t, "ev": ev, **kw}


def test_a_fully_async_step_is_the_time_between_syncs_and_gen_what_is_not_training() -> None:
    events = [_ev(0, "run_start"), _ev(0, "rollout_start", round=0),
              _ev(10, "train_start"), _ev(50, "train_end", batch=1),
              _ev(50, "decision", what="param_sync"),
              _ev(60, "train_start"), _ev(100, "train_end", batch=2),
              _ev(100, "train_start"), _ev(120, "train_end", batch=3),
              _ev(130, "decision", what="param_sync"),
              _ev(150, "train_start"), _ev(200, "train_end", batch=4),
              _ev(210, "decision", what="param_sync"), _ev(210, "run_end")]
    got = runs.summary(events)
    # windows 50-130 and 130-210 (the first, the fill, left out): walls 80 and 80;
    # training 40 + 20 = 60 and 50; gen the rest, 20 and 30
    assert got["step_s"] == 80 and got["train_s"] == 55 and got["gen_s"] == 25
    assert got["windows"] == 2 and got["step_sd_s"] == 0


def test_a_colocated_step_runs_from_a_round_start_to_the_next() -> None:
    events = [_ev(0, "run_start"), _ev(0, "rollout_start", round=0),
              _ev(30, "rollout_complete", round=0), _ev(40, "train_start"),
              _ev(70, "train_end", batch=5), _ev(80, "rollout_start", round=1),
              _ev(100, "rollout_complete", round=1), _ev(105, "train_start"),
              _ev(135, "train_end", batch=6), _ev(140, "run_end")]
    got = runs.summary(events)
    assert got["step_s"] == 70  # 80 and 60
    assert got["gen_s"] == 25  # 30 and 20
    assert got["train_s"] == 30


def _table(**steps: float) -> pd.DataFrame:
    """Every run at step 100, gen 10, training 90, but the steps given."""
    labels = [r.label for r in runs.runs(0)]
    return pd.DataFrame([{"reading": "lengths from gen", "label": label,
                          "step_s": steps.get(label, 100.0), "gen_s": 10.0, "wait_s": 10.0,
                          "train_s": 60.0 if label.startswith("64:64") else 90.0}
                         for label in labels])


def test_the_speedup_is_the_colocated_step_over_the_fully_async_one() -> None:
    got = {(c.claim, c.config, c.reading): c
           for c in claims.claims(_table(**{"colocate 32": 300.0, "fully async 16:16": 120.0}))}
    speed = got[("speedup over colocate sync (x, 400 steps)", "fully async 16:16",
                 "lengths from gen")]
    assert speed.harness == pytest.approx(2.5) and speed.paper_low == 2.66 and speed.within
    # the README's own GPU-seconds of the update, its cells as first published (6f0b21c
    # README.md:333-334): 269.80 x 16 / (313.81 x 32)
    gpu = got[("update_actor GPU-seconds, fully async / colocate", "fully async 16:16",
               "lengths from gen")]
    assert gpu.paper_low == pytest.approx(0.4299, abs=1e-4)
    # simulated: 90 x 16 / (90 x 0.8 x 32) = 0.625 (the kernel trainer's FSDP: the update
    # is 4 of a colocated training's 5 forwards' work)
    assert gpu.harness == pytest.approx(0.625)


def test_the_orderings_fail_when_the_steps_do_not_fall() -> None:
    rising = _table(**{"64:64 s=0": 100.0, "64:64 s=0.1": 110.0, "64:64 s=0.3": 90.0})
    got = {c.claim: c for c in claims.claims(rising)}
    assert not got["step falls with staleness 0 > 0.1 > 0.3 (1 = holds)"].within
    falling = _table(**{"64:64 s=0": 130.0, "64:64 s=0.1": 120.0, "64:64 s=0.3": 110.0,
                        "64:64 require_batches=1": 130.0, "64:64 require_batches=2": 120.0,
                        "fully async 64:64": 110.0})
    got = {c.claim: c for c in claims.claims(falling)}
    assert got["step falls with staleness 0 > 0.1 > 0.3 (1 = holds)"].within
    assert got["step falls with require_batches 1 > 2 > 4 (1 = holds)"].within


def test_every_colocated_row_is_an_input_and_every_other_row_a_prediction() -> None:
    rows = claims.claims(_table())
    for c in rows:
        if "colocate" in c.config and c.metric != "speedup":
            assert c.kind in ("input", "input (not fitted)"), c
        else:
            assert c.kind == "prediction", c
        assert math.isfinite(c.harness)
    # the one-row setups (30B-A3B, one-step-off) make their rows once, under one reading
    # and its first 100 steps
    assert {c.reading for c in rows if "30B" in c.claim} == {
        "lengths from gen", "lengths from gen, first 100 steps"}
    assert sum("one-step-off" in c.claim for c in rows) == 2 * 8


def test_one_step_offs_gpu_seconds_are_the_readmes_ratio() -> None:
    """A trajectory's training GPU-seconds, one-step-off over colocated: FSDP2 (n 12 both)
    (108 + 337) x 12 / 6,144 over (88 + 286) x 16 / 6,144 = 0.8924; Megatron (its colocated
    baseline n 16, megatron_colocate.sh:26) (120 + 347) x 12 / 6,144 over (119 + 344) x 16 /
    8,192 = 467 / 463 = 1.0086. Simulated from the table (90 s each): 0.75 and 1."""
    got = {(c.claim, c.config): c for c in claims.claims(_table())}
    for engine, want, sim in (("FSDP2", 0.8924, 0.75), ("Megatron", 1.0086, 1.0)):
        c = got[("one-step-off training GPU-seconds a trajectory / colocate",
                 f"one-step-off {engine}")]
        assert c.paper_low == pytest.approx(want, abs=1e-4)
        assert c.harness == pytest.approx(sim)


def test_a_one_step_off_step_leaves_out_its_fill_and_its_drain() -> None:
    """Generation G = 30, training T = 50: rounds start at 0, 30, 80, 130; the run ends
    after the last training (130 + 30 waits for nothing: 130 + 50 + 50 = 230)."""
    events = [_ev(0, "run_start", system="verl-one-step-off"), _ev(0, "rollout_start"),
              _ev(30, "rollout_complete"), _ev(30, "rollout_start"), _ev(30, "train_start"),
              _ev(60, "rollout_complete"), _ev(80, "train_end", batch=7),
              _ev(80, "rollout_start"), _ev(80, "train_start"), _ev(110, "rollout_complete"),
              _ev(130, "train_end", batch=8), _ev(130, "rollout_start"),
              _ev(130, "train_start"), _ev(160, "rollout_complete"),
              _ev(180, "train_end", batch=9), _ev(180, "train_start"),
              _ev(230, "train_end", batch=10), _ev(230, "run_end")]
    got = runs.summary(events)
    # windows 30-80 and 80-130 (not 0-30, the fill, nor 130-230, the drain)
    assert got["windows"] == 2 and got["step_s"] == 50 and got["train_s"] == 50
    assert got["wait_s"] == 0


def test_the_committed_fit_reproduces_the_colocated_rows_it_was_fitted_to(tmp_path) -> None:
    """The per-size reading's mean at 64 GPUs gives the README's colocated gen (150.72 s)
    within 2%, and its scale and fixed cost a step its training (70.26 + 133.41 = 203.67 s,
    less the switch's trainer side, under a second) within 2%: the calibration file and
    the simulator agree (a stale file fails)."""
    from harness.studies.reproduce.pool import run_one
    from harness.studies.reproduce.verl_async import lengths, trainer

    fitted = lengths("lengths from gen, per size")
    run = next(r for r in runs.runs(0) if r.label == "colocate 64")
    cfg = runs.with_lengths(run, {k: value[0] for k, value in fitted.items()}, tmp_path)
    got, _ = run_one(trainer(cfg, fitted[64]), tmp_path / "colocate.jsonl", runs.summary)
    assert got["gen_s"] == pytest.approx(150.72, rel=0.02)
    assert got["train_s"] == pytest.approx(203.67, rel=0.02)
