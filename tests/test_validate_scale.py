"""`validate scale`: the row rule, the summary with fitted rows apart, the claims reader and
the command's refusals, each against values worked by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.studies.validate.scale import sources
from harness.studies.validate.scale.report import markdown
from harness.studies.validate.scale.rows import frame, shorten, summary


def _rows(source: str, pairs: list[tuple[float, float, bool]]) -> pd.DataFrame:
    return frame([{"case": str(i), "quantity": "q", "unit": "s", "measured": m,
                   "predicted": p, "fitted": f} for i, (m, p, f) in enumerate(pairs)],
                 source, "ref")


def test_error_is_predicted_over_measured_minus_one_and_missing_sides_are_nan() -> None:
    df = _rows("a", [(10.0, 11.0, False), (0.0, 1.0, False), (4.0, float("nan"), False)])
    assert df["error"].iloc[0] == pytest.approx(0.10)
    assert math.isnan(df["error"].iloc[1]) and math.isnan(df["error"].iloc[2])


def test_summary_counts_fitted_rows_apart() -> None:
    # held out: +10%, -20%, +50%; fitted: +1% (which must not enter the held-out figures)
    a = _rows("a", [(10, 11, False), (10, 8, False), (10, 15, False), (100, 101, True)])
    b = _rows("b", [(1, 3, False)])  # +200%
    s = summary(pd.concat([a, b], ignore_index=True)).set_index("source")
    ra = s.loc["a"]
    assert ra["n"] == 3 and ra["fitted_n"] == 1
    assert ra["median_abs"] == pytest.approx(0.20)
    assert ra["median"] == pytest.approx(0.10)
    assert ra["worst"] == pytest.approx(0.50)
    assert ra["within_10"] == pytest.approx(1 / 3) and ra["within_25"] == pytest.approx(2 / 3)
    assert ra["fitted_median_abs"] == pytest.approx(0.01)
    pooled = s.loc["pooled: every held-out row"]  # 10%, 20%, 50%, 200%: median 35%
    assert pooled["n"] == 4 and pooled["median_abs"] == pytest.approx(0.35)
    alike = s.loc["pooled: each source alike"]  # median of 20% and 200%
    assert alike["median_abs"] == pytest.approx(1.10)


def test_claims_reader_takes_gpu_runs_only_a_source_per_reading(tmp_path: Path) -> None:
    path = tmp_path / "claims.csv"
    pd.DataFrame([
        {"paper": "verl-async", "claim": "gen", "metric": "gen", "config": "c32",
         "reading": "r1", "paper_low": 100.0, "paper_high": 100.0, "harness": 90.0,
         "kind": "input"},
        {"paper": "verl-async", "claim": "step", "metric": "step", "config": "16:16",
         "reading": "r1", "paper_low": 200.0, "paper_high": 300.0, "harness": 300.0,
         "kind": "prediction"},
        {"paper": "verl-async", "claim": "step", "metric": "step", "config": "16:16",
         "reading": "r2", "paper_low": 50.0, "paper_high": 50.0, "harness": 75.0,
         "kind": "input (not fitted)"},
        {"paper": "rolloutpipe", "claim": "x", "metric": "x", "config": "c", "reading": "",
         "paper_low": 1.0, "paper_high": 1.0, "harness": 1.0, "kind": "prediction"},
    ]).to_csv(path, index=False)
    df = sources.reproductions(path)
    assert set(df["source"]) == {"verl-async (r1)", "verl-async (r2)"}  # no rolloutpipe
    r1 = df[df["source"] == "verl-async (r1)"].set_index("quantity")
    assert bool(r1.loc["gen", "fitted"]) and not bool(r1.loc["step", "fitted"])
    assert r1.loc["step", "measured"] == 250.0  # the middle of 200-300
    assert r1.loc["step", "error"] == pytest.approx(0.2)
    r2 = df[df["source"] == "verl-async (r2)"].iloc[0]
    assert not bool(r2["fitted"]) and r2["error"] == pytest.approx(0.5)


def test_markdown_fits_100_columns_with_long_readings() -> None:
    long = "lengths from gen, per size, staleness 0.1 (16_16.sh:74)"
    s = summary(pd.concat([_rows(f"verl-async ({long})", [(1, 2, False)]),
                           _rows("weight sync", [(1, 2, False)])], ignore_index=True))
    text = markdown(s)
    assert "verl-async [1]" in text and f"[1] {long}" in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_cli_refuses_a_missing_claims_table_and_foreign_options(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["validate", "scale", "--claims", str(tmp_path / "no.csv"),
                                   "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "--claims" in res.output
    assert not (tmp_path / "o").exists()
    res = CliRunner().invoke(app, ["validate", "scale", "--rounds", "3"])
    assert res.exit_code == 2 and "--rounds does not apply" in res.output


def test_weight_sync_rows_are_fitted_exactly_where_the_fit_declares() -> None:
    from harness.studies.validate import weight_sync_fit as wf

    df = sources.weight_sync()
    fit, held, _ = wf.split(wf.read())
    assert int(df["fitted"].sum()) == len(fit) and int((~df["fitted"]).sum()) == len(held)
    fitted_ids = {c.split(":")[0] for c in df.loc[df["fitted"], "case"]}
    assert fitted_ids == {r.id for r in fit} and fitted_ids <= set(wf.FIT_ROWS)


def test_more_readings_than_letters_are_numbered() -> None:
    names = [f"verl-async (a long reading of the source, number {i})" for i in range(30)]
    short, legend = shorten(names * 2)  # a reading seen twice keeps its number
    assert short[names[29]] == "verl-async [30]" and len(legend) == 30


def test_a_readings_window_and_script_setting_stay_in_its_source() -> None:
    assert sources.base_reading("lengths from gen, staleness 0.1 (16_16.sh:74), first 100 "
                                "steps") == "lengths from gen"
    assert sources.base_reading("lengths from gen, per size, cells swapped (verl@15a9b0f), "
                                "300 steps") == "lengths from gen, per size, cells swapped " \
        "(verl@15a9b0f)"


def test_validate_gpu_refuses_the_scale_only_claims_option(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["validate", "gpu", "--claims", "x.csv",
                                   "--out", str(tmp_path / "g")])
    assert res.exit_code == 2 and "--claims does not apply to validate gpu" in res.output
    assert not (tmp_path / "g").exists()
