"""The drift probes of `validate`: the calibration's prediction at a probe's
shape, a cell's drift against the first probe, and the summary's reading of
them, each against a value worked out by hand."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from harness.core.config import RunConfig
from harness.core.trace import read_trace
from harness.run.execute import execute
from harness.sim.calibration import path_of
from harness.studies.validate import compare, drift
from harness.studies.validate.grid import Cell
from harness.studies.validate.run import sim_twin

DECODE = {"fixed_s": 0.002, "per_seq_s": 1e-4, "per_ctx_token_s": 1e-7}


def calibration(tmp_path: Path) -> Path:
    text = path_of("cpu-live").read_text().replace(
        "[decode]\n", "[decode]\nfit_rel_rms = 0.125\npoints = 18\n")
    path = tmp_path / "cal.toml"
    path.write_text(text)
    return path


def test_prediction_is_the_calibrations_step_for_that_shape() -> None:
    # 4 sequences holding 4 x (500 + 24) = 2,096 tokens: 2 ms + 0.4 ms + 0.2096 ms
    assert drift.predicted(DECODE, 4, 2096) == pytest.approx(0.0026096)


def test_a_cells_drift_is_against_the_first_probe(tmp_path: Path) -> None:
    cal = calibration(tmp_path)
    d = drift.decode_of(cal)
    rows = [{"cell": "a", "when": "before", "batch": 1, "context_tokens": 524.0,
             "step_s": 1.2 * drift.predicted(d, 1, 524)},
            {"cell": "a", "when": "after", "batch": 16, "context_tokens": 16 * 524.0,
             "step_s": 1.5 * drift.predicted(d, 16, 16 * 524)},
            {"cell": "b", "when": "before", "batch": 4, "context_tokens": 4 * 524.0,
             "step_s": 0.9 * drift.predicted(d, 4, 4 * 524)}]
    rows.append({**rows[0], "cell": "b", "when": "after",
                 "step_s": 1.32 * drift.predicted(d, 1, 524)})
    probes = drift.table(rows, cal)
    assert probes.ratio.tolist() == pytest.approx([1.2, 1.5, 0.9, 1.32])
    # drift is against the first probe at the same batch: b's batch-1 probe is 1.32/1.2
    assert probes["drift"].tolist() == pytest.approx([1.0, 1.0, 1.0, 1.1])
    assert drift.per_cell(probes) == pytest.approx({"a": 1.0, "b": math.sqrt(1.1)})


def test_the_summary_gives_the_fit_the_drift_and_how_the_drift_follows_the_error(
        tmp_path: Path) -> None:
    cal = calibration(tmp_path)
    d = drift.decode_of(cal)
    cells, traces, rows = [], {}, []
    # three cells run on the simulator as "live" and as their own twin (no error), with
    # probes at 1.0 (before) and 1.0, 1.21, 1.44 (after): drifts 1.0, 1.1, 1.2
    for i, (groups, after) in enumerate(((4, 1.0), (6, 1.21), (8, 1.44))):
        cfg = RunConfig(system="slime", workload="lsat-ar-live", groups=groups,
                        group_size=4, update_groups=2, rounds=1, runtime="live")
        cfg.live.lengths = "replay"
        cell = Cell("lsat", f"v{i}", cfg)
        facts = {"kv_cache_tokens": 100_000, "max_num_seqs": 128}
        execute(sim_twin(cfg, str(cal), facts).validate(), tmp_path / f"{i}.jsonl")
        trace = read_trace(tmp_path / f"{i}.jsonl")
        cells.append(cell)
        traces[cell.name] = (trace, trace)
        rows += [{"cell": cell.name, "when": when, "batch": 16, "context_tokens": 16 * 524,
                  "step_s": x * 1.1 * drift.predicted(d, 16, 16 * 524)}
                 for when, x in (("before", 1.0), ("after", after))]
    s = compare.write(cells, traces, tmp_path, drift.table(rows, cal), cal)
    assert s["median_rel_error"] == 0.0
    assert s["fit_ratio_min"] == pytest.approx(1.1)
    assert s["fit_ratio_max"] == pytest.approx(1.1 * 1.44)
    assert (s["drift_min"], s["drift_median"], s["drift_max"]) == pytest.approx((1.0, 1.1, 1.2))
    assert np.isnan(s["drift_follows_rollout_r"])  # live/sim is 1.0 in every cell
    assert s["calibration_fit_rel_rms"] == 0.125
    text = (tmp_path / "summary.md").read_text()
    assert "1.00-1.20x (median 1.10x)" in text and "correlated" not in text
    assert "its 18 microbenchmarks within 12.5% rms (over 10%" in text.replace("\n  ", " ")
