"""AReaL's reproduction: its readings against the sources by hand, the calibration's rows,
a claim's tolerance, and numbers the folder computes, worked by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from harness.studies.reproduce.areal import claims, dynsched, fit, readings, runs


def test_staleness_bars_are_the_figures_labels() -> None:
    # AReaL@10d9b282:assets/staleness_throughput.png, the value printed on each bar
    assert readings.STALENESS == {0: 128.7, 1: 269.3, 2: 356.6, 4: 356.6, 8: 371.7,
                                  16: 382.4, None: 396.8}
    # blog/AReaL_v0_3.md:179-180, the 1.5B's hours for 1,000 steps
    assert (readings.TABLE2_SYNC_H, readings.TABLE2_ASYNC_H) == (41.0, 14.8)
    # the two sources agree: 128.7k x 41.0 / 14.8 = 356.5k, Fig. 7's staleness 2 and 4
    assert 128.7 * 41.0 / 14.8 == pytest.approx(356.53, abs=0.01)


def test_a_log_axis_read_by_hand() -> None:
    # ticks 10, 20, ..., 320 from pixel 300 (bottom) to 100 (top): row 250 is 1.25 ticks up,
    # 10 x 2^1.25 = 23.78
    assert readings.log_axis(250, (10, 20, 40, 80, 160, 320), 300, 100) == pytest.approx(
        23.784, abs=1e-3)


def test_each_panels_ticks_read_back_as_their_labels() -> None:
    # the pixel rows of the six ticks are 46.2 apart; each reads back as its (rounded) label
    for (_, ctx), labels in readings.LABELS.items():
        bottom, top = readings.TICK_ROWS[ctx]
        for k, label in enumerate(labels):
            row = bottom - k * (bottom - top) / 5
            assert readings.log_axis(row, labels, bottom, top) == pytest.approx(label,
                                                                              rel=0.032)


def test_figure_values_read_by_hand() -> None:
    # verl 1.5B 16k at 32 GPUs sits on the bottom tick (29k); AReaL 32B 16k at 512 just
    # under the top one (37k); verl 7B 32k at 64 on the bottom tick (19k)
    assert readings.scaling("1.5B", 16384, "verl")[32] == pytest.approx(29_000, rel=0.01)
    assert 34_000 < readings.scaling("32B", 16384, "areal")[512] < 36_000
    assert readings.scaling("7B", 32768, "verl")[64] == pytest.approx(19_000, rel=0.01)
    assert readings.error("1.5B", 16384, "areal", 32) == 0.08  # hidden under verl's marker
    assert readings.error("1.5B", 16384, "verl", 32) == 0.05


def test_tokens_a_sample_by_hand() -> None:
    # 128,700 tokens/s x 147.6 s (41.0 h / 1,000 steps) over 512 x 16 samples
    assert readings.staleness_sample_tokens() == pytest.approx(128_700 * 147.6 / 8192)
    assert readings.staleness_sample_tokens() == pytest.approx(2318.86, abs=0.01)


def test_the_allocation_as_build_cmd_makes_it() -> None:
    assert runs.split(32) == (24, 8) and runs.split(512) == (384, 128)
    cfg = runs.areal("7B", 16384, 64)
    # 48 SGLang GPUs at TP 1; 16 trainer GPUs at TP 1 x PP 4: 4 ranks of 32,768 tokens
    assert (cfg.sim.rollout_engines, cfg.sim.trainer_gpus) == (48, 16)
    assert (cfg.sim.trainer_tp, cfg.sim.trainer_pp, cfg.sim.micro_batch_tokens) == (1, 4, 32768)
    assert cfg.max_response_tokens == 16384 - 1024
    big = runs.areal("32B", 32768, 256)
    assert (big.sim.rollout_tp, big.sim.rollout_engines, big.sim.mem_fraction) == (8, 24, 0.7)


def test_effective_throughput_by_hand() -> None:
    events = [{"ev": "train_end", "tokens": 100}, {"ev": "optimizer_step", "t": 10.0},
              {"ev": "train_end", "tokens": 200}, {"ev": "optimizer_step", "t": 30.0},
              {"ev": "train_end", "tokens": 300}, {"ev": "optimizer_step", "t": 50.0}]
    got = runs.summary(events)
    assert got["throughput"] == pytest.approx((200 + 300) / 40) and got["step_s"] == 20.0
    one = runs.summary(events[:2])  # one step: its tokens over the time from the start
    assert one["throughput"] == pytest.approx(10.0) and one["step_s"] == 10.0


def test_the_verl_fit_runs_only_its_declared_rows(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    seen = []

    def fake(tasks, progress=False, reader=None):  # noqa: ANN001, ANN202
        # a step of 100 s + 50 s x scale + the fixed cost, 2.574e7 tokens a step
        seen.extend(cfg for cfg, _ in tasks)
        steps = [100 + 50 * cfg.sim.train_scale + (cfg.sim.train_step_fixed_s or 0)
                 for cfg, _ in tasks]
        return [{"throughput": 2.574e7 / t, "step_s": t} for t in steps]

    monkeypatch.setattr(fit, "run_configs", fake)
    fit.fit_verl(runs.READINGS[0], tmp_path, lambda _m: None)
    # Fig. 7's 128.7k tokens/s is a 200 s step of 2.574e7 tokens: scale (200 - 100) / 50
    assert fit.fit_areal(tmp_path, lambda _m: None) == 2.0
    verl = {(c.sim.model, c.max_response_tokens + 1024, c.sim.trainer_gpus)
            for c in seen if c.system == "verl"}
    assert verl == {(runs.MODELS[m], c, n) for m, c, n in fit.FIT_ROWS}
    areal = [c for c in seen if c.system == "areal"]
    assert areal and all(c.areal.max_head_offpolicyness == 0 for c in areal)
    assert set(fit.targets()) == set(fit.FIT_ROWS)


def test_the_scale_and_fixed_cost_fit_by_hand() -> None:
    # steps A + B x scale + fixed with B halving with GPUs; made at scale 3 and 20 s a step
    ab = {32: (100.0, 50.0), 64: (100.0, 25.0), 256: (100.0, 6.25)}
    observed = {n: a + b * 3 + 20 for n, (a, b) in ab.items()}  # 270, 195, 138.75
    scale, fixed, rms = fit.fit_scale_fixed(ab, observed)
    assert scale == pytest.approx(3.0, rel=1e-3) and fixed == pytest.approx(20.0, abs=0.05)
    assert rms < 1e-4
    # one GPU count: the fixed cost and the scale trade off, the fit still meets the rows
    _, _, rms_one = fit.fit_scale_fixed({32: ab[32]}, {32: observed[32]})
    assert rms_one < 1e-4


def test_verls_runs_take_the_kernel_trainer_on_fsdp_served_eagerly() -> None:
    from harness.sim import calibration
    from harness.sim.trainer.build import mfu_line_reason
    from harness.sim.trainer.speed import framework_of

    cfg = runs.verl("7B", 16384, 64, runs.READINGS[0])
    data = calibration.load(cfg.sim.calibration)
    assert cfg.sim.calibration == runs.VERL_CALIBRATION and framework_of(data) == "fsdp"
    assert mfu_line_reason(cfg.sim, data) is None  # the kernel trainer prices it
    assert cfg.sim.engine_eager and cfg.sim.micro_batch_tokens == 16384  # a GPU's tokens
    areal = runs.areal("7B", 16384, 64)
    assert framework_of(calibration.load(areal.sim.calibration)) == "megatron"
    assert mfu_line_reason(areal.sim, calibration.load(areal.sim.calibration)) is None
    for reading in runs.READINGS:  # each reading's own fit, as calibrate wrote it
        scale, fixed = fit.verl_speed(reading)
        assert scale > 0 and fixed >= 0


def test_the_staleness_family_searches_the_kernel_trainers_scale() -> None:
    from harness.studies.reproduce.areal import would_need as wn

    family = wn.ArealTrainer()
    assert family.knob == "train_scale" and (family.lo, family.hi) == (0.1, 30.0)
    assert family.neutral == pytest.approx(
        float(__import__("harness.sim.calibration", fromlist=["load"]).load(
            runs.PAPER)["fit"]["train_scale"]))


def _sim() -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = [{"reading": reading, "label": run.label, "throughput": 1e5}
            for reading in runs.READINGS for run in runs.scaling_runs(reading)]
    stale = [{"eta": runs.eta_label(e), "throughput": 1e5} for e in readings.STALENESS]
    return pd.DataFrame(rows), pd.DataFrame(stale)


def test_inputs_are_exactly_the_fitted_rows() -> None:
    scaling, staleness = _sim()
    out = claims.scaling_claims(scaling) + claims.staleness_claims(staleness)
    inputs = [c for c in out if c.kind == "input"]
    assert len(inputs) == 2 * len(fit.FIT_ROWS) + 1
    assert all(c.claim.startswith("verl") or "staleness 0 " in c.config for c in inputs)
    assert {c.kind for c in out} == {"input", "prediction"}


def test_a_claims_tolerance_by_hand() -> None:
    scaling, _ = _sim()
    row = next(c for c in claims.scaling_claims(scaling)
               if c.claim.startswith("verl") and c.config.startswith("1.5B 16k, 32 "))
    value = readings.scaling("1.5B", 16384, "verl")[32]
    assert (row.paper_low, row.paper_high) == pytest.approx((0.95 * value, 1.05 * value))
    # within when inside [0.95 v x 0.9, 1.05 v x 1.1]
    assert row.holds(1.05 * value * 1.1 * 0.999) and not row.holds(1.05 * value * 1.1 * 1.001)
    assert row.holds(0.95 * value * 0.9 * 1.001) and not row.holds(0.95 * value * 0.9 * 0.999)


def test_dynamic_schedule_reading_by_hand() -> None:
    # ds.md:339: dynamic is 15.3% faster than 8+24 and 17.5% than 16+16
    assert dynsched.FASTER == pytest.approx(0.825 / 0.847)
    assert "not modelled" in dynsched.refusal()  # Qwen3.5-35B-A3B is refused, in one line
    assert dynsched.bound({"paper_waiting_ratio": 0.41}) == "rollout"
    assert dynsched.bound({"paper_waiting_ratio": 0.01}) == "trainer"
    assert math.isclose(dynsched.WAIT_BOUND, 0.05)


def test_the_dynamic_schedules_twin_runs_on_the_roofline(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    # plan's runs do not go through the pool, so the claims' roofline twin's step model
    # reaches them only through the config (before: the twin's rows held the kernels' values)
    assert dynsched.config(16, 16).sim.step_model == "kernels"
    monkeypatch.setattr(dynsched, "step_model_override", lambda: "roofline")
    assert dynsched.config(16, 16).sim.step_model == "roofline"


def test_would_need_reads_its_rows_back() -> None:
    from harness.studies.reproduce.areal import would_need as wn
    from harness.studies.reproduce.family import Miss

    assert wn.parse("7B 16k, 64 H800 (scaling_trend_vs_verl.png)") == ("7B", 16384, 64)
    assert wn.parse("32B 32k, 512 H800 (scaling_trend_vs_verl.png)") == ("32B", 32768, 512)
    assert wn.eta_of("1.5B 8k, 128 H800, staleness 16 (Fig. 7)") == 16
    assert wn.eta_of("1.5B 8k, 128 H800, staleness unbounded (Fig. 7)") is None
    scaling, staleness = _sim()
    rows = claims.scaling_claims(scaling) + claims.staleness_claims(staleness)
    families = [f() for f in wn.FAMILIES]
    for c in rows:  # every throughput and ratio row has its family; the ordering has none
        m = Miss(c.paper, c.claim, c.config, c.paper_low, c.paper_high, 0.0, c.tolerance,
                 c.reading)
        matched = [f for f in families if f.matches(m)]
        assert len(matched) == (0 if "(1 = holds)" in c.claim else 1), c.claim


def test_the_partly_hidden_markers_carry_the_wider_error() -> None:
    # the four AReaL markers under verl's (read from their visible top edge)
    assert readings.HIDDEN == {
        ("1.5B", 16384, "areal", 32), ("1.5B", 32768, "areal", 32),
        ("7B", 16384, "areal", 128), ("7B", 32768, "areal", 64)}
    assert readings.error("1.5B", 32768, "areal", 32) == 0.08
    # its top edge at pixel 659 plus the radius 9.5: row 668.5 on the 27k-241k axis
    assert readings.scaling("1.5B", 32768, "areal")[32] == pytest.approx(30_080, rel=0.005)


def test_verls_switch_is_the_one_step_off_readmes() -> None:
    # (321 - 247 s) a step (one_step_off_policy/README.md:64) less the 7B's engine bytes
    # there (19.0 GB over 51 GB/s: 0.37 s), plus this setup's bytes (1.5B at TP 2 on 32
    # GPUs: 4.0 GB engine side, 1.8 GB trainer side: 0.11 s), over two hand-overs: 36.87 s
    cfg = runs.verl("1.5B", 16384, 32, runs.READINGS[0])
    assert cfg.sim.switch_s == pytest.approx((74 - 0.373 + 0.113) / 2, abs=0.01)
