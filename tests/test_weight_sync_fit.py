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
