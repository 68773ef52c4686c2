"""Weight publication grows with the model (harness/sim/weight_sync.py): a calibration's
weight_sync_s is its own model's, scaled by total weight bytes for any other; the
calibration's own model, a run's own sim.weight_sync_s and a calibration that names no
model keep their time. Expected values are worked out by hand in the comments."""

from __future__ import annotations

import pytest

from harness.core.config import RunConfig
from harness.sim import calibration
from harness.sim.presets import load_model
from harness.studies.validate import weight_sync as ws


def _sync(model: str, cal: str = "rolloutpipe", override: float | None = None) -> float:
    cfg = RunConfig()
    cfg.sim.model, cfg.sim.calibration, cfg.sim.weight_sync_s = model, cal, override
    return calibration.resolve(cfg.sim)["weight_sync_s"]


def test_the_calibrations_own_model_keeps_its_time() -> None:
    # exactly the file's value, so nothing a paper reproduces on it moves
    assert _sync("qwen3-1.7b") == 2.0
    assert _sync("qwen2.5-7b", "pipelinerl") == 1.0
    assert _sync("qwen2.5-14b", "rollpacker") == 2.0


def test_another_model_scales_by_total_weight_bytes() -> None:
    # rolloutpipe: 2.0 s for Qwen3-1.7B's 1.721B; Qwen2.5-7B's 7.616B: 2.0 x 7.616 / 1.721
    assert _sync("qwen2.5-7b") == pytest.approx(8.850668)  # 15.232 / 1.721
    # a MoE moves every expert: 30.532B, not its 3.353B active; pipelinerl 1.0 s for 7.616B
    assert _sync("qwen3-30b-a3b", "pipelinerl") == pytest.approx(30.532 / 7.616)
    # rollpacker: 2.0 s for 14.77B; its 32B setting (32.764B) publishes in 4.4366 s
    assert _sync("qwen2.5-32b", "rollpacker") == pytest.approx(2.0 * 32.764 / 14.77)


def test_a_runs_own_time_and_an_unnamed_calibration_stay_flat() -> None:
    assert _sync("qwen2.5-7b", override=0.7) == 0.7
    assert _sync("qwen2.5-7b", "cpu-live") == 0.05  # measured on the live model, no name


def test_every_paper_calibration_names_a_model_preset() -> None:
    for name in ("rolloutpipe", "pipelinerl", "april", "rollpacker"):
        own = calibration.load(name)["hardware"]["model"]
        assert load_model(own).params_b > 0, name


def test_the_verl_check_reports_the_scaled_charge_beside_the_flat_one() -> None:
    rows = {r["model"]: r for r in ws.rows()}
    moe = rows["Qwen3-30B-A3B"]
    # rolloutpipe: 2.0 s x 30,532,122,624 / 1.721e9 = 35.4818 s, 2.2514 of verl's 15.76 s
    assert moe["flat_s"] == 2.0
    assert moe["scaled_s"] == pytest.approx(2.0 * 30_532_122_624 / 1.721e9)
    assert moe["scaled_over_plain"] == pytest.approx(35.48184 / 15.76, rel=1e-6)
    by_cal = {c["calibration"]: c for c in ws.scaled_by_calibration(ws.rows())}
    # pipelinerl: 2 B x 7.616e9 / 1.0 s = 15.232 GB/s; Qwen3-235B-A22B's 235,093,634,560
    # x 1.0 / 7.616e9 = 30.868 s, 1.302 of checkpoint-engine's 23.70 s
    pl = by_cal["pipelinerl"]
    assert pl["gbs"] == pytest.approx(15.232)
    assert pl["seconds"][2] == pytest.approx(235_093_634_560 / 7.616e9)
    assert pl["over_engine"][2] == pytest.approx(30.8684 / 23.70, rel=1e-4)
    text = ws.report()
    assert "| pipelinerl | qwen2.5-7b | 15.2 | Qwen3-235B-A22B | 1 | 0.0171 | 30.87 |" in text
    assert all(len(line) <= 100 for line in text.splitlines())
