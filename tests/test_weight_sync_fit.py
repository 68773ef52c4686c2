"""The weight-sync fit: the split is declared, the fit reads only the declared rows, the
committed constants are what the fit gives, and the CSV's counts are the code's."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from harness.sim import weight_sync as ws
from harness.sim.presets import load_model, shipped_config
from harness.studies.validate import weight_sync as report
from harness.studies.validate import weight_sync_fit as wf


def test_the_split_is_declared_by_row_id() -> None:
    fit, held, unscored = wf.split(wf.read())
    assert {r.id for r in fit} == set(wf.FIT_ROWS) and len(fit) == 12
    assert len(held) == 8 and len(unscored) == 20 and len(fit + held + unscored) == 40
    assert "verl-7b-ckpt" in {r.id for r in unscored}  # below the NVLink floor
    assert not set(wf.FIT_ROWS) & {r.id for r in held}


def test_the_fit_uses_only_the_declared_rows() -> None:
    rows = wf.read()
    base = wf.fit(wf.split(rows)[0])
    # every held-out and unscored row made ten times slower: the same constants
    slower = [r if r.id in wf.FIT_ROWS else dataclasses.replace(
        r, values={**r.values, "seconds": str(10 * r.seconds)}) for r in rows]
    assert wf.fit(wf.split(slower)[0]) == base
    # a fit row changed: the constants move
    moved = [dataclasses.replace(r, values={**r.values, "seconds": str(2 * r.seconds)})
             if r.id == "verl-235b-nccl" else r for r in rows]
    assert wf.fit(wf.split(moved)[0]) != base


def test_the_committed_constants_are_the_fits() -> None:
    fitted = wf.fit(wf.split(wf.read())[0])
    for name in wf.NAMES:
        assert getattr(ws.FITTED, name) == pytest.approx(getattr(fitted, name), rel=2e-3), name


def test_the_fit_stops_where_a_tighter_one_does() -> None:
    """The committed digits do not hang on where least_squares chose to stop."""
    rows = wf.split(wf.read())[0]
    fitted, best = wf.fit(rows), wf.fit(rows, xtol=1e-15, ftol=1e-15, gtol=1e-15)
    for name in wf.NAMES:
        assert getattr(fitted, name) == pytest.approx(getattr(best, name), rel=1e-3), name


def _cost(rows: list[wf.Row], k: ws.Constants) -> float:
    return sum(math.log(ws.seconds(r.transfer(), k) / r.seconds) ** 2 for r in rows)


def test_the_pinned_constant_is_one_the_fit_rows_leave_free() -> None:
    """Why eff_ipc is a prior: refitted with it anywhere in its bounds, the fit rows' cost is
    the same, so the rows cannot choose it; a constant they do set (c_tensor) is not free."""
    rows = wf.split(wf.read())[0]
    base = _cost(rows, wf.fit(rows))
    for share in (0.05, 0.2, 1.0):
        assert _cost(rows, wf.fit(rows, {"eff_ipc": share})) == pytest.approx(base, rel=1e-6)
    moved = dataclasses.replace(ws.FITTED, c_tensor=2 * ws.FITTED.c_tensor)
    assert _cost(rows, moved) > 1.5 * base


def test_a_missing_declared_row_is_refused() -> None:
    rows = [r for r in wf.read() if r.id != "verl-7b-nccl"]
    with pytest.raises(ValueError, match="FIT_ROWS names rows it lacks: verl-7b-nccl"):
        wf.split(rows)


def test_the_csvs_counts_are_the_codes() -> None:
    for r in wf.read():
        config = r.values["config"]
        if not config:
            continue
        if "--" in config:
            cfg = json.loads(shipped_config(config).read_text("utf-8"))
            tensors, experts = ws.tensor_count(cfg), ws.expert_tensor_count(cfg)
        else:
            _, tensors, experts = ws.model_transfer_facts(config)
            assert r.number("params_b") == pytest.approx(load_model(config).params_b, abs=0.01)
        assert (r.number("tensors"), r.number("expert_tensors")) == (tensors, experts), r.id


def test_errors_are_the_factor_off() -> None:
    # predicted 2 s for 1 s and 1 s for 2 s are both 100% off
    errs = [{"path": "nccl", "abs_log": abs(math.log(2.0))},
            {"path": "nccl", "abs_log": abs(math.log(0.5))}]
    assert wf.summary(errs)["nccl"] == pytest.approx({"rows": 2, "median": 1.0, "worst": 1.0})


def test_the_report_fits_100_columns_and_names_every_row() -> None:
    text = report.report()
    assert all(len(line) <= 100 for line in text.splitlines())
    for r in wf.read():
        assert r.id in text, r.id
    assert "| DeepSeek-V3, 128 + 128 H100, NCCL | 780 |" in text
