"""The drift probes of `validate`: prediction, per-cell drift and the scaled
calibration, each against a value worked out by hand; and that a twin simulated
with the scaled calibration is slower by about that factor."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import pytest

from harness.core.config import RunConfig
from harness.core.metrics import round_metrics
from harness.core.trace import read_trace
from harness.run.execute import execute
from harness.sim.calibration import path_of
from harness.studies.validate import compare, drift
from harness.studies.validate.grid import Cell
from harness.studies.validate.run import sim_twin

DECODE = {"fixed_s": 0.002, "per_seq_s": 1e-4, "per_ctx_token_s": 1e-7}


def calibration(tmp_path: Path) -> Path:
    text = path_of("cpu-live").read_text()
    path = tmp_path / "cal.toml"
    path.write_text(text)
    return path


def test_prediction_is_the_calibrations_step_for_that_shape() -> None:
    # 4 sequences holding 4 x (500 + 24) = 2,096 tokens: 2 ms + 0.4 ms + 0.2096 ms
    assert drift.predicted(DECODE, 4, 2096) == pytest.approx(0.0026096)


def test_a_cells_drift_is_the_geometric_mean_of_its_probes(tmp_path: Path) -> None:
    cal = calibration(tmp_path)
    d = drift.decode_of(cal)
    rows = [{"cell": "a", "when": "before", "batch": 1, "context_tokens": 524.0,
             "step_s": 1.2 * drift.predicted(d, 1, 524)},
            {"cell": "a", "when": "after", "batch": 16, "context_tokens": 16 * 524.0,
             "step_s": 1.5 * drift.predicted(d, 16, 16 * 524)},
            {"cell": "b", "when": "before", "batch": 4, "context_tokens": 4 * 524.0,
             "step_s": 0.9 * drift.predicted(d, 4, 4 * 524)}]
    probes = drift.table(rows, cal)
    assert probes.ratio.tolist() == pytest.approx([1.2, 1.5, 0.9])
    assert drift.per_cell(probes) == pytest.approx({"a": math.sqrt(1.2 * 1.5), "b": 0.9})


def test_the_scaled_calibration_scales_the_decode_step_and_nothing_else(tmp_path: Path
                                                                        ) -> None:
    cal = calibration(tmp_path)
    out = drift.scaled(cal, 1.25, tmp_path / "drift" / "a.toml")
    with open(cal, "rb") as fh:
        before = tomllib.load(fh)
    with open(out, "rb") as fh:
        after = tomllib.load(fh)
    for key in drift.SCALED:
        assert after["decode"][key] == pytest.approx(1.25 * before["decode"][key])
    rest = {k: v for k, v in before["decode"].items() if k not in drift.SCALED}
    assert {k: after["decode"][k] for k in rest} == rest  # prefill, admission: unchanged
    assert after["train"] == before["train"] and after["fixed"] == before["fixed"]


def test_a_twin_with_a_slower_step_takes_longer_and_is_compared(tmp_path: Path) -> None:
    cal = calibration(tmp_path)
    cfg = RunConfig(system="slime", workload="lsat-ar-live", groups=4, group_size=4,
                    update_groups=2, rounds=1, runtime="live")
    cfg.live.lengths = "replay"
    cell = Cell("lsat", "slime", cfg)
    facts = {"kv_cache_tokens": 100_000, "max_num_seqs": 128}
    execute(sim_twin(cfg, str(cal), facts).validate(), tmp_path / "sim.jsonl")
    slow = drift.scaled(cal, 2.0, tmp_path / "slow.toml")
    execute(sim_twin(cfg, str(slow), facts).validate(), tmp_path / "slow.jsonl")
    sim, slower = read_trace(tmp_path / "sim.jsonl"), read_trace(tmp_path / "slow.jsonl")
    a, b = round_metrics(sim)[0], round_metrics(slower)[0]
    # decode dominates this rollout; prefill and admission are not scaled
    assert 1.6 < b["rollout_complete_s"] / a["rollout_complete_s"] < 2.0
    # the slow twin as "live": the plain twin is off by the drift, the scaled one not at all
    s = compare.write([cell], {cell.name: (slower, sim)}, tmp_path, {cell.name: slower},
                      {cell.name: 2.0})
    assert s["drift_median_rel_error"] == 0.0 and s["median_rel_error"] > 0.3
    assert s["drift_median"] == 2.0
    text = (tmp_path / "summary.md").read_text()
    assert "2.00-2.00x" in text and "drift taken out" in text
