"""`rolloutbench regress`: the committed baselines are the CI gate on scheduling
metrics (test_committed_baselines_pass runs the real grid, a couple of seconds),
and the check itself must catch a moved value, accept one within tolerance,
and write baselines that pass with --update."""

from __future__ import annotations

import csv
import io
import math
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.studies.regress import DEFAULT_DIR, load_grid, load_tolerances, within

CELL, ROUND, METRIC = "slime/lsat-ar/small", "0", "rollout_to_train_end_s"


def regress_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["regress", *args])
    return result.exit_code, result.output


def perturbed(tmp_path: Path, factor: float) -> Path:
    """A copy of the committed baselines with one value of one cell scaled by `factor`."""
    out = tmp_path / "baselines"
    shutil.copytree(DEFAULT_DIR, out)
    path = out / "metrics.csv"
    rows = list(csv.reader(io.StringIO(path.read_text())))
    col = rows[0].index(METRIC)
    (row,) = [r for r in rows if r[0] == CELL and r[1] == ROUND]
    row[col] = repr(float(row[col]) * factor)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    path.write_text(buf.getvalue())
    return out


def test_committed_baselines_pass() -> None:
    """The regression gate: if this fails, a change moved a scheduling metric. If
    that was intended, run `rolloutbench regress --update` and commit the CSV."""
    code, out = regress_cli()
    assert code == 0, out
    cells = len(load_grid(DEFAULT_DIR / "grid.toml"))
    assert f"{cells} cells, " in out and ", 0 moved" in out
    assert "added" not in out and "missing" not in out


def test_a_value_beyond_tolerance_fails_and_is_named(tmp_path: Path) -> None:
    code, out = regress_cli("--baselines", str(perturbed(tmp_path, 1.01)))
    assert code == 1, out
    (line,) = [ln for ln in out.splitlines() if CELL in ln]
    assert METRIC in line and "-0.9901" in line  # now is 1/1.01 of the baseline: -0.99 %
    assert ", 1 moved" in out


def test_a_value_within_tolerance_passes(tmp_path: Path) -> None:
    rel, _ = load_tolerances(DEFAULT_DIR / "tolerances.toml")[METRIC]
    code, out = regress_cli("--baselines", str(perturbed(tmp_path, 1 + rel / 10)))
    assert code == 0, out
    assert ", 0 moved" in out


def test_update_writes_baselines_that_then_pass(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    code, out = regress_cli("--baselines", str(fresh), "--update", "--jobs", "2")
    assert code == 0, out
    assert "cells added" in out  # nothing to compare with yet: every cell is new
    assert {p.name for p in fresh.iterdir()} == {"grid.toml", "tolerances.toml",
                                                 "metrics.csv"}
    assert (fresh / "metrics.csv").read_text() == (DEFAULT_DIR / "metrics.csv").read_text()
    code, out = regress_cli("--baselines", str(fresh))
    assert code == 0, out


def test_missing_cells_fail(tmp_path: Path) -> None:
    out_dir = perturbed(tmp_path, 1.0)
    grid = out_dir / "grid.toml"
    grid.write_text(grid.read_text().replace('"lsat-ar", ', ""))
    code, out = regress_cli("--baselines", str(out_dir))
    assert code == 1, out
    assert f"missing (in the baselines, not in the grid): {CELL} (rounds 0, 1)" in out


def test_tolerance_rule() -> None:
    assert within(100.0, 100.00009, 1e-6, 0.0) and not within(100.0, 100.001, 1e-6, 0.0)
    assert within(0.0, 1e-9, 0.0, 1e-8) and not within(0.0, 1e-9, 1.0, 0.0)
    assert within(math.nan, math.nan, 0.0, 0.0) and not within(math.nan, 1.0, 1.0, 1.0)


def test_a_baselines_folder_that_is_not_there_is_bad_input_not_a_regression(
        tmp_path: Path) -> None:
    """A typo in --baselines ran the whole grid, then failed as a regression (exit 1,
    every cell 'added'); a file there failed only after the grid. One line, exit 2, at once."""
    code, out = regress_cli("--baselines", str(tmp_path / "nonexist"))
    assert code == 2 and out.strip() == (
        f"error: --baselines: no folder {tmp_path / 'nonexist'} (--update makes one from this run)")
    (tmp_path / "afile").write_text("x")
    for update in ((), ("--update",)):
        code, out = regress_cli("--baselines", str(tmp_path / "afile"), *update)
        assert code == 2 and out.strip() == (
            f"error: --baselines: {tmp_path / 'afile'} is a file; it names a folder of baselines")


def test_a_baselines_folder_without_metrics_is_bad_input_not_a_regression(
        tmp_path: Path) -> None:
    """An empty folder ran the grid and printed 92 "added" lines, exit 1 (a new user's
    trial): one line, exit 2, before the grid runs."""
    (tmp_path / "empty").mkdir()
    code, out = regress_cli("--baselines", str(tmp_path / "empty"))
    assert code == 2 and out.strip() == (f"error: --baselines: {tmp_path / 'empty'} holds no "
                                         "metrics.csv (--update writes it from this run)")


def test_a_grid_of_ones_own_is_named_in_its_errors(tmp_path: Path) -> None:
    out_dir = perturbed(tmp_path, 1.0)
    grid = out_dir / "grid.toml"
    grid.write_text(grid.read_text().replace('systems = "all"', 'systems = ["nosuch"]'))
    assert '"nosuch"' in grid.read_text()
    code, out = regress_cli("--baselines", str(out_dir))
    assert code == 2 and out.startswith(f"error: {grid}: unknown system 'nosuch'"), out


def test_csv_with_nothing_moved_is_its_header() -> None:
    """`--csv` with nothing moved printed nothing at all; a reader of it got no columns."""
    result = CliRunner().invoke(app, ["regress", "--csv"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "cell,round,metric,baseline,now,change_pct\n"


def test_a_passing_regress_says_no_calibration_notes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Five `note:` lines (weight sync, train scale, hand-overs) on every CI run; said
    only where something moved."""
    from harness.core import notes

    monkeypatch.setattr(notes, "_said", set())  # as a fresh process: none said yet
    ok = CliRunner().invoke(app, ["regress"])
    assert ok.exit_code == 0 and "note:" not in ok.stderr
    code, out = regress_cli("--baselines", str(perturbed(tmp_path, 1.01)))
    assert code == 1 and "note:" in out
