"""The what-if studies (harness/studies/whatif.py, docs/whatif/): every spec expands, every
study has its page and figure, and each study's sweep, summary and figure run end
to end on a shrunken copy of its spec (a few small cells)."""

from __future__ import annotations

import copy
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.studies.whatif import (
    run_study,
    spec_path,
    study_names,
    study_sweep,
    with_yardstick,
)

REPO = Path(__file__).resolve().parents[1]


# The staleness study's cells are small (U = 8 groups, 32 steps: 0.1-0.5 s each, slime-async's
# default of 512 groups in flight a few seconds); its own tests run a small grid
# (tests/test_whatif_staleness.py).
MOST_CELLS = {"staleness": 700}


def test_every_study_has_a_spec_a_page_and_a_figure() -> None:
    assert study_names() == ["fgd-frontier", "heavy-tails", "april-oversampling",
                             "pipelinerl-concurrency", "combos", "staleness"]
    index = (REPO / "docs" / "whatif" / "README.md").read_text()
    for name in study_names():
        sweep = study_sweep(name)
        # small enough for a minute or two on 2 cores
        assert 10 <= len(sweep.cells) <= MOST_CELLS.get(name, 150), name
        page = (REPO / "docs" / "whatif" / f"{name}.md").read_text()
        assert f"whatif_{name}.png" in page and f"sweeps/whatif/{name}.toml" in page
        assert (REPO / "figures" / f"whatif_{name}.png").exists()
        assert f"({name}.md)" in index


def _shrink(table: dict[str, Any], zipped: bool) -> None:
    """Lists of values to their first and last (zip rows: only when there are many)."""
    for key, value in table.items():
        if isinstance(value, dict):
            _shrink(value, zipped)
        elif isinstance(value, list) and len(value) > 2 and (not zipped or len(value) > 6):
            table[key] = [value[0], value[-1]]


def tiny(name: str) -> dict[str, Any]:
    with open(spec_path(name), "rb") as fh:
        spec = copy.deepcopy(tomllib.load(fh))
    spec.pop("repeats", None)
    base = spec["base"]
    base.update(rounds=3, groups=8, update_groups=min(base.get("update_groups", 2), 8))
    _shrink(spec.get("grid", {}), zipped=False)
    _shrink(spec.get("zip", {}), zipped=True)
    return spec


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in study_names() if n != "staleness"])
def test_study_runs_end_to_end_on_a_small_grid(name: str, tmp_path: Path) -> None:
    res = run_study(name, tmp_path, jobs=1, figures=tmp_path / "fig", spec=tiny(name))
    assert res.failed == 0 and res.ran == res.cells > 0
    assert res.figure == tmp_path / "fig" / f"whatif_{name}.png" and res.figure.stat().st_size
    assert len(res.summary) and (tmp_path / name / "summary.csv").exists()
    info = json.loads((tmp_path / name / "study.json").read_text())
    assert info["cells"] == res.cells and info["wall_s"] >= 0
    again = run_study(name, tmp_path, jobs=1, figures=tmp_path / "fig", spec=tiny(name))
    assert again.ran == 0 and again.wall_s == 0  # resumed: nothing left to run


def test_cli_rejects_an_unknown_study(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["whatif", "heavy-tail", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "did you mean 'heavy-tails'" in result.output
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_combos_ranks_by_each_runs_own_yardstick(tmp_path: Path) -> None:
    """The combos summary's trained tokens per second are each cell's trace's own
    (harness.core.yardstick), averaged over the seeds of a schedule."""
    import pandas as pd

    from harness.core.trace import read_trace
    from harness.core.yardstick import delivered

    spec = tiny("combos")
    spec["repeats"] = 2
    res = run_study("combos", tmp_path, jobs=1, figures=tmp_path / "fig", spec=spec)
    rows = pd.read_parquet(tmp_path / "combos" / "results.parquet")
    # a sweep's rows carry each run's figures: no trace read again, none cached
    assert not list((tmp_path / "combos" / "cells").glob("*/yardstick.json"))
    older = rows.drop(columns=["no_window", "trained_tokens_per_s"])  # as recorded before
    again = with_yardstick(older, tmp_path / "combos")
    for cell in rows["cell"].unique():
        fig = delivered(read_trace(tmp_path / "combos" / "cells" / cell / "trace.jsonl.zst"))
        assert rows[rows["cell"] == cell]["trained_tokens_per_s"].eq(
            fig["trained_tokens_per_s"]).all()
        shown = json.loads((tmp_path / "combos" / "cells" / cell / "yardstick.json").read_text())
        assert shown["value"]["trained_tokens_per_s"] == fig["trained_tokens_per_s"]
        assert again[again["cell"] == cell]["trained_tokens_per_s"].eq(
            fig["trained_tokens_per_s"]).all()
    first = rows.drop_duplicates("cell").iloc[0]
    same = rows.drop_duplicates("cell")
    same = same[(same["system"] == first["system"]) & (same["workload"] == first["workload"])
                & (same["over_sampling_groups"] == first["over_sampling_groups"])]
    seeds = [delivered(read_trace(tmp_path / "combos" / "cells" / c / "trace.jsonl.zst"))
             ["trained_tokens_per_s"] for c in same["cell"]]
    assert len(seeds) == 2
    row = res.summary[res.summary["workload"] == first["workload"]].iloc[0]
    assert row["trained_tokens_per_s"] == pytest.approx(sum(seeds) / 2)


@pytest.mark.slow
def test_the_bar_counts_the_cells_left_and_names_those_done_before(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A first run's bar counts every cell and says nothing of cells done before; a
    rerun's counts only those left, and says how many were kept."""
    from harness.studies import whatif

    spec = tiny("heavy-tails")
    monkeypatch.setattr(whatif, "read_spec", lambda name: copy.deepcopy(spec))
    cells = len(study_sweep("heavy-tails", spec).cells)
    first = CliRunner().invoke(app, ["whatif", "heavy-tails", "--out", str(tmp_path),
                                     "--jobs", "1"])
    assert first.exit_code == 0, first.output
    assert f"heavy-tails: {cells} to go" in first.output and "done before" not in first.output
    gone = next((tmp_path / "heavy-tails" / "cells").glob("*/result.json"))
    gone.unlink()
    again = CliRunner().invoke(app, ["whatif", "heavy-tails", "--out", str(tmp_path),
                                     "--jobs", "1"])
    assert again.exit_code == 0, again.output
    assert f"heavy-tails ({cells - 1} of {cells} cells done before): 1 to go" in again.output


@pytest.mark.slow
def test_a_summary_too_long_for_a_table_is_pointed_to(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """staleness' 222 summary rows printed 4,770 lines of table; past MOST_ROWS_SHOWN
    rows the command names the files that hold them."""
    import pandas as pd

    from harness.cli import whatif as cli_whatif
    from harness.studies import whatif

    spec = tiny("heavy-tails")
    monkeypatch.setattr(whatif, "read_spec", lambda name: copy.deepcopy(spec))
    monkeypatch.setattr(cli_whatif, "MOST_ROWS_SHOWN", 2)
    done = CliRunner().invoke(app, ["whatif", "heavy-tails", "--out", str(tmp_path),
                                    "--jobs", "1"])
    assert done.exit_code == 0, done.output
    rows = len(pd.read_csv(tmp_path / "heavy-tails" / "summary.csv"))
    flat = " ".join(done.stdout.split())
    assert rows > 2 and f"heavy-tails: {rows} rows, too many to print here: " in flat
    assert "┃" not in done.stdout and "r2te_s" not in done.stdout  # no table


@pytest.mark.slow
def test_kill_stops_a_study_as_ctrl_c_does(tmp_path: Path) -> None:
    """`kill` (SIGTERM) mid-study: exit 143 and "terminated", the tables of the cells that
    finished written, no worker left (it died at once, its forked workers running on)."""
    import multiprocessing
    import os
    import signal
    import threading
    import time

    from harness.cli import common

    cells = tmp_path / "heavy-tails" / "cells"

    def kill_after_a_cell() -> None:
        deadline = time.monotonic() + 120
        while not list(cells.glob("*/result.json")) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    def unhandled(signum: int, frame: object) -> None:  # the old code: not the test's death
        raise RuntimeError("SIGTERM not handled by the command")

    others = set(multiprocessing.active_children())  # an earlier test's (a live engine's)
    before = signal.signal(signal.SIGTERM, unhandled)
    try:
        threading.Thread(target=kill_after_a_cell, daemon=True).start()
        result = CliRunner().invoke(app, ["whatif", "heavy-tails", "--out", str(tmp_path),
                                          "--jobs", "1"])
    finally:
        signal.signal(signal.SIGTERM, before)
        common._TERMINATED[0] = False  # set by the kill: later commands here are not killed
    assert result.exit_code == 143, result.output
    done = len(list(cells.glob("*/result.json")))
    assert f"terminated: heavy-tails: its results hold the {done} of 36 cells" in " ".join(
        result.output.split()) and "Traceback" not in result.output
    assert (tmp_path / "heavy-tails" / "results.csv").exists()
    assert not set(multiprocessing.active_children()) - others
