"""verl's reproduction under the kernel trainer (issue 35): its layout, training read with
the optimizer's steps, the fit of the scale and the fixed cost a step, and the colocated
sync from the transfer model; values worked out by hand."""

from __future__ import annotations

import pytest

from harness.sim.weight_sync import predict_sync_s, publish_s
from harness.studies.reproduce.verl_async import fit, runs


def _by_label() -> dict[str, runs.Run]:
    return {r.label: r for r in runs.runs(0)}


def test_each_trainer_runs_its_scripts_layout_and_micro_batch() -> None:
    """7B FSDP2: Ulysses SP 4 (sh:60) as CP 4, a replica's micro-batch (2,048 + 28,672) x 2
    x 4 = 245,760 tokens (dp_actor.py:396 multiplies by the SP size), whatever the GPUs;
    Megatron one-step-off: TP 2 x PP 2, (2,048 + 8,192) x 2 = 20,480; the 30B: TP 2 x CP 2
    x EP 8, (2,048 + 8,192) x 2 = 20,480 (megatron_actor.py:191 multiplies by CP)."""
    by = _by_label()
    for label in ("colocate 32", "colocate 128", "fully async 16:16", "osp colocate 16 FSDP2"):
        s = by[label].cfg.sim
        assert (s.trainer_tp, s.trainer_pp, s.trainer_cp) == (1, 1, 4), label
    assert by["colocate 32"].cfg.sim.micro_batch_tokens == 245_760
    assert by["colocate 128"].cfg.sim.micro_batch_tokens == 245_760
    assert by["osp colocate 16 FSDP2"].cfg.sim.micro_batch_tokens == 22_528 * 2 * 4
    meg = by["one-step-off 4:12 Megatron"].cfg.sim
    assert (meg.trainer_tp, meg.trainer_pp, meg.trainer_cp, meg.micro_batch_tokens) == (
        2, 2, 1, 20_480)
    moe = by["30B fully async 96:32"].cfg.sim
    assert (moe.trainer_tp, moe.trainer_cp, moe.trainer_ep, moe.micro_batch_tokens) == (
        2, 2, 8, 20_480)


def _ev(t: float, ev: str, **kw: object) -> dict:
    return {"t": t, "ev": ev, **kw}


def test_training_holds_the_optimizer_steps_after_each_mini_batch() -> None:
    """verl's update_actor times optimizer.step with the mini-batches: windows 50-130 and
    130-210, two mini-batches of 20 s and one of 30 s, each followed by a 5 s step (the
    kernel trainer's fixed cost a step): training 50 and 35, gen the rest."""
    events = [_ev(0, "run_start"), _ev(0, "rollout_start", round=0),
              _ev(10, "train_start"), _ev(40, "train_end", batch=1),
              _ev(45, "optimizer_step", step=1), _ev(50, "decision", what="param_sync"),
              _ev(60, "train_start"), _ev(80, "train_end", batch=2),
              _ev(85, "optimizer_step", step=2),
              _ev(90, "train_start"), _ev(110, "train_end", batch=3),
              _ev(115, "optimizer_step", step=3),
              _ev(130, "decision", what="param_sync"),
              _ev(150, "train_start"), _ev(180, "train_end", batch=4),
              _ev(185, "optimizer_step", step=4),
              _ev(210, "decision", what="param_sync"), _ev(210, "run_end")]
    got = runs.summary(events)
    assert got["step_s"] == 80
    assert got["train_s"] == pytest.approx((50 + 35) / 2)
    assert got["gen_s"] == pytest.approx((30 + 45) / 2)


def test_two_gpu_counts_give_the_scale_and_the_fixed_cost(monkeypatch, tmp_path) -> None:
    """Training A + B x scale + 16 x fixed (512 prompts, mini-batch 32: 16 steps a
    window) with A, B = 26, 167 at 64 GPUs and 25.7, 90 at 128: the README's 205.5 and
    166.7 s are scale 0.5 and 6 s a step (205.5 - 166.7 = 0.3 + 77 x 0.5; 205.5 - 26 -
    83.5 = 96 = 16 x 6); with no fixed cost the scale alone meets neither."""
    line = {64: (26.0, 167.0), 128: (25.7, 90.0)}

    def colocated(means, speed, setup, sizes, write):
        return {n: {"train_s": line[n][0] + line[n][1] * speed[0] + 16 * speed[1]}
                for n in sizes}

    monkeypatch.setattr(fit, "_colocated", colocated)
    want = {64: 205.5, 128: 166.7}
    scale, fixed = fit.fit_speed(dict.fromkeys(want, 1757.0), want, runs.SEVEN_B,
                                 lambda _m: None, tmp_path)
    assert (scale, fixed) == (pytest.approx(0.5, abs=1e-4), pytest.approx(6.0, abs=1e-3))
    free, none = fit.fit_speed(dict.fromkeys(want, 1757.0), want, runs.SEVEN_B,
                               lambda _m: None, tmp_path, 0.0)
    assert none == 0.0 and free > 0.5


def test_a_colocated_run_syncs_by_the_transfer_model_not_the_old_rule() -> None:
    """The hybrid engine's hand-over of weights: CUDA IPC on the run's own GPUs, priced by
    the transfer model (weight_sync.predict_sync_s), where the rule before #35 scaled the
    7B's 0.12 s by parameters (0.12 x 30.5 / 7.6 = 0.48 s for the 30B)."""
    by = _by_label()
    for label, model, gpus in (("colocate 64", "qwen2.5-7b", 64),
                               ("30B colocate 128", "qwen3-30b-a3b", 128)):
        want = predict_sync_s(model, "h20", gpus, gpus, path="ipc", colocated=True)
        assert by[label].cfg.sim.weight_sync_s == pytest.approx(want, abs=1e-4)
    old = publish_s("qwen3-30b-a3b", {"hardware": {"model": "qwen2.5-7b"}}, 0.12)
    assert by["30B colocate 128"].cfg.sim.weight_sync_s != pytest.approx(old, rel=0.05)
    assert by["fully async 64:64"].cfg.sim.weight_sync_s is None  # NCCL: the calibration's


def test_the_eager_reading_serves_vllm_eagerly_and_trains_as_its_fit_says(tmp_path) -> None:
    """verl's rollout ran enforce_eager: True in the runs' era (verl@94d681d:verl/trainer/
    config/rollout/rollout.yaml:35): the eager reading's 7B runs serve vLLM without CUDA
    graphs, and at its fitted scale and fixed cost colocate 64 trains in the README's
    70.26 + 133.41 = 203.67 s (less the switch's trainer side, under a second) within 2%."""
    from harness.studies.reproduce.pool import run_one
    from harness.studies.reproduce.verl_async import lengths, trainer

    fitted = lengths(runs.EAGER)
    assert set(fitted) == set(runs.SIZES)  # the 7B only
    run = next(r for r in runs.runs(0) if r.label == "colocate 64")
    cfg = trainer(runs.with_lengths(run, {k: v[0] for k, v in fitted.items()}, tmp_path),
                  fitted[64], runs.EAGER)
    assert cfg.sim.engine_eager and not run.cfg.sim.engine_eager
    got, _ = run_one(cfg, tmp_path / "colocate.jsonl", runs.summary)
    assert got["train_s"] == pytest.approx(203.67, rel=0.02)
