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
    # before and after alike in every cell: the machine did not move within one
    assert s["noise_floor"] == 0.0
    first = text.splitlines()[0]
    assert first.startswith("**Headline: the simulated twin is within 0.0% of the live runs**")
    assert "noise floor 0.0%" in first and "one calibration for the whole grid" in first


def probe(decode: dict[str, float], factors: list[float]) -> list[dict[str, float]]:
    """probe_decode's rows at batches 1, 4, 16, 64, each step `factor` x the fit."""
    return [{"batch": b, "context_tokens": b * 524.0,
             "step_s": f * drift.predicted(decode, b, b * 524.0)}
            for b, f in zip((1, 4, 16, 64), factors, strict=True)]


def test_a_calibration_that_its_probes_agree_with_holds() -> None:
    decode = {**DECODE, "fit_rel_rms": 0.04}
    verdict = drift.check(decode, probe(decode, [1.02] * 4), probe(decode, [1.0] * 4))
    # level: geometric mean of four 1.02s and four 1.0s; noise: log(1.02) / sqrt(2)
    assert verdict.level == pytest.approx(math.sqrt(1.02))
    assert verdict.noise == pytest.approx(math.log(1.02) / math.sqrt(2))
    assert verdict.tolerance == pytest.approx(0.04 + 3 * math.log(1.02) / math.sqrt(2))
    assert verdict.ok and verdict.why() == ""


def test_a_calibration_the_machine_left_behind_is_measured_again() -> None:
    # the second validation of issue 18: a fit within 6.1% rms, probes 1.33-1.47x it
    decode = {**DECODE, "fit_rel_rms": 0.061}
    verdict = drift.check(decode, probe(decode, [1.33, 1.40, 1.45, 1.47]),
                          probe(decode, [1.35, 1.41, 1.44, 1.46]))
    assert verdict.fit_ok and not verdict.probes_ok and not verdict.ok
    assert "two probes just after it read 1.41x its fit" in verdict.why()
    loose = drift.check({**DECODE, "fit_rel_rms": 0.152}, probe(DECODE, [1.0] * 4),
                        probe(DECODE, [1.0] * 4))
    assert loose.probes_ok and not loose.ok  # 15.2% rms over its own microbenchmarks
    assert loose.why().startswith("its fit is 15.2% rms over its own microbenchmarks")
    # with no noise and a tight fit, 5% either way is still agreement (NOISE_FLOOR)
    tight = {**DECODE, "fit_rel_rms": 0.0}
    assert drift.check(tight, probe(tight, [1.049] * 4), probe(tight, [1.049] * 4)).ok
    assert not drift.check(tight, probe(tight, [1.06] * 4), probe(tight, [1.06] * 4)).ok


def test_the_noise_floor_is_the_machines_move_within_a_cell() -> None:
    rows = [{"cell": c, "when": w, "batch": b, "step_s": s}
            for c, w, b, s in (("a", "before", 1, 1.0), ("a", "after", 1, 1.1),
                               ("a", "before", 4, 2.0), ("a", "after", 4, 2.2),
                               ("b", "before", 1, 1.0), ("b", "after", 1, 0.96),
                               ("c", "before", 1, 1.0), ("c", "after", 1, 1.02))]
    # moves: a 10%, b 4%, c 2%: the median 4%
    assert compare.noise_floor(pd.DataFrame(rows)) == pytest.approx(0.04)


def test_the_summary_says_what_the_calibration_check_decided() -> None:
    held = [{"attempt": 1, "fit_rel_rms": 0.2, "probe_level": 1.4, "probe_noise": 0.01,
             "ok": False, "used": False, "why": "loose"},
            {"attempt": 2, "fit_rel_rms": 0.05, "probe_level": 1.03, "probe_noise": 0.02,
             "ok": True, "used": True, "why": ""}]
    line = compare.calibration_line({"calibration_check": held})
    assert line == ("- calibration checked before the grid: attempt 2 of 2 held (fit 5.0% rms, "
                    "two probes just after it 1.03x the fit, probe noise 2.0%)")
    failed = [{**r, "ok": False, "used": r["attempt"] == 1, "why": "probes 1.40x"}
              for r in held]
    line = compare.calibration_line({"calibration_check": failed})
    assert line.startswith("- warning: no calibration held in 2 attempts; the grid used "
                           "attempt 1 of 2, whose probes came closest (probes 1.40x)")
    assert compare.calibration_line({}) is None


def test_calibration_is_measured_again_until_it_holds(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio
    import types

    from harness.live import measure as live_measure
    from harness.live import session as live_session
    from harness.studies.validate import run

    # attempt 1: probes 1.4x the fit (the machine moved); attempt 2: they agree
    levels = iter([1.4, 1.4, 1.0, 1.01])
    decode = {**DECODE, "fit_rel_rms": 0.05}

    async def measure(session: object, cfg: RunConfig, out: Path) -> dict:
        out.write_text(f"# {out.name}\n")
        return {"decode": decode}

    async def probe_decode(llm: object, window: int, tag: str) -> list[dict[str, float]]:
        return probe(decode, [next(levels)] * 4)

    monkeypatch.setattr(live_session, "measure", measure)
    monkeypatch.setattr(live_measure, "probe_decode", probe_decode)
    said: list[str] = []
    session = types.SimpleNamespace(backend=types.SimpleNamespace(llm=None))
    used = tmp_path / "calibration.toml"
    asyncio.run(run._calibrate(session, RunConfig(), used, said.append))
    assert used.read_text() == "# calibration-attempt-2.toml\n"
    check = pd.read_csv(tmp_path / "calibration-check.csv")
    assert check.ok.tolist() == [False, True] and check.used.tolist() == [False, True]
    assert any("calibration attempt 1: two probes just after it read 1.40x" in s for s in said)
