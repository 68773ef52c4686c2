"""The decode-step probes of `validate`: the calibration's prediction at a probe's
shape, a cell's factor over the fit and over the first probe, the knob that
scales the step, and the probed twins in the summary, each against a value worked
out by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from harness.core.config import RunConfig
from harness.core.trace import read_trace
from harness.run.execute import execute
from harness.sim import knobs
from harness.sim.calibration import path_of
from harness.sim.perf import DecodeModel
from harness.studies.validate import compare, drift
from harness.studies.validate.grid import Cell
from harness.studies.validate.run import sim_twin

DECODE = {"fixed_s": 0.002, "per_seq_s": 1e-4, "per_ctx_token_s": 1e-7, "prefill_per_token_s": 5e-6}


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
    assert drift.per_cell(probes, "drift") == pytest.approx({"a": 1.0, "b": math.sqrt(1.1)})
    assert drift.per_cell(probes) == pytest.approx({"a": math.sqrt(1.2 * 1.5),
                                                    "b": math.sqrt(0.9 * 1.32)})


def test_the_probed_knob_scales_every_decode_step_and_nothing_else(tmp_path: Path) -> None:
    d = drift.decode_of(calibration(tmp_path))
    plain = DecodeModel.measured(d)
    scaled = knobs.apply_decode(plain, drift.probed_knobs(1.25, 128))
    for batch, ctx in ((1, 524), (16, 16 * 524), (128, 128 * 1500)):
        assert scaled.steps_time(10, batch, ctx) == pytest.approx(
            1.25 * plain.steps_time(10, batch, ctx))
    # prefill and admission: unchanged
    assert scaled.prefill_per_token_s == plain.prefill_per_token_s == d["prefill_per_token_s"]
    assert scaled.admit_per_request_s == plain.admit_per_request_s


def test_the_summary_gives_the_probes_and_the_probed_twins_errors(tmp_path: Path) -> None:
    cal = calibration(tmp_path)
    d = drift.decode_of(cal)
    cells, traces, probed, rows = [], {}, {}, []
    facts = {"kv_cache_tokens": 100_000, "max_num_seqs": 128}
    # three cells whose "live" run is a twin with its step x1.1, x1.21, x1.44; each
    # probed at that factor before and after: the probed twin matches it exactly
    for i, (groups, factor) in enumerate(((4, 1.1), (6, 1.21), (8, 1.44))):
        cfg = RunConfig(system="slime", workload="lsat-ar-live", groups=groups,
                        group_size=4, update_groups=2, rounds=1, runtime="live")
        cfg.live.lengths = "replay"
        cell = Cell("lsat", f"v{i}", cfg)
        execute(sim_twin(cfg, str(cal), facts).validate(), tmp_path / f"{i}.jsonl")
        with knobs.active(drift.probed_knobs(factor, 128)):
            execute(sim_twin(cfg, str(cal), facts).validate(), tmp_path / f"{i}-slow.jsonl")
        live = read_trace(tmp_path / f"{i}-slow.jsonl")
        cells.append(cell)
        traces[cell.name] = (live, read_trace(tmp_path / f"{i}.jsonl"))
        probed[cell.name] = live
        rows += [{"cell": cell.name, "when": when, "batch": 16, "context_tokens": 16 * 524,
                  "step_s": factor * drift.predicted(d, 16, 16 * 524)}
                 for when in ("before", "after")]
    s = compare.write(cells, traces, tmp_path, drift.table(rows, cal), cal, probed)
    assert s["median_rel_error"] > 0.05 and s["probed_median_rel_error"] == 0.0
    assert s["probed_ranking_alike"] == s["probed_ranking_pairs"] == 3
    assert (s["cell_factor_min"], s["cell_factor_median"], s["cell_factor_max"]) == \
        pytest.approx((1.1, 1.21, 1.44))
    assert (s["drift_min"], s["drift_max"]) == pytest.approx((1.0, 1.44 / 1.1))
    assert s["factor_follows_rollout_r"] > 0.9  # the slower the step, the slower the run
    assert s["calibration_fit_rel_rms"] == 0.125
    text = (tmp_path / "summary.md").read_text().replace("\n  ", " ")
    assert "1.10-1.44x a cell (median 1.21x" in text and "step probed beside it" in text
    assert "its 18 microbenchmarks within 12.5% rms (over 10%" in text
    table = pd.read_csv(tmp_path / "validate.csv")
    assert (table.rel_error_probed == 0).all() and (table.sim_probed == table.live).all()
