"""What-if studies on the simulator: questions the papers did not ask.

Each study is a sweep spec (`sweeps/whatif/NAME.toml`, run by `harness.studies.sweep`),
a summary table and a figure; `docs/whatif/NAME.md` says what it shows.

    rolloutbench whatif NAME|all --out DIR [--jobs N] [--figures DIR]

writes DIR/NAME/ (the sweep's cells/ and results.parquet, summary.csv, summary.md
for a study that explains its answer in words, and study.json with the wall time)
and the figure whatif_NAME.png (into --figures, default DIR/NAME). Sweeps resume, so
a rerun into the same DIR only redraws.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.core.progress import late_stage
from harness.studies.whatif_studies import STUDIES

SPECS = Path(__file__).resolve().parents[2] / "sweeps" / "whatif"


@dataclass
class StudyResult:
    name: str
    out: Path
    figure: Path
    summary: pd.DataFrame
    cells: int
    ran: int  # cells run now (the rest were done already)
    failed: int
    wall_s: float  # the sweep's wall time in this call (0 when all cells were done)
    jobs: int
    extra: dict[str, Any] = field(default_factory=dict)


def spec_path(name: str) -> Path:
    return SPECS / f"{name}.toml"


def study_names() -> list[str]:
    return list(STUDIES)


def read_spec(name: str) -> dict[str, Any]:
    """The study's spec file as a table; ConfigError naming the file when it cannot be read."""
    from harness.core.files import read_toml

    return read_toml(spec_path(name))


def study_sweep(name: str, spec: dict[str, Any] | None = None) -> Any:
    """The study's sweep (`harness.studies.sweep.Sweep`): its spec file, or `spec`,
    expanded where the study's spec is not a plain sweep spec."""
    from harness.studies.sweep import parse_spec

    study = STUDIES[name]
    table = read_spec(name) if spec is None else spec
    return parse_spec(study.expand(table) if study.expand else table)


YARDSTICK_CACHE = "yardstick.json"
YARDSTICK_VERSION = 1  # bump when harness.core.yardstick's rule changes: cells are reread


def _delivered(cell: Path) -> dict[str, Any]:
    """The yardstick's figures of one cell's trace, cached beside it."""
    from harness.core.files import read_cached, write_cached
    from harness.core.trace_io import find_trace
    from harness.core.yardstick import KEYS, delivered
    from harness.studies.staleness.traces import read_events

    cache = cell / YARDSTICK_CACHE
    figures = read_cached(cache, YARDSTICK_VERSION)
    if figures is None:
        fig = delivered(read_events(find_trace(cell)))
        figures = {k: fig[k] for k in KEYS}
        write_cached(cache, YARDSTICK_VERSION, figures)
    return figures


def with_yardstick(df: pd.DataFrame, out: Path) -> pd.DataFrame:
    """Each round's row with what its run delivered over its steady window
    (harness.core.yardstick: the figure systems of every kind are ranked by), the same
    on every row of a cell. A sweep's rows carry them (`no_window` '' or why there is
    none); only a cell recorded before they did has its trace read again."""
    from harness.core.yardstick import KEYS

    if "cell" not in df or df.empty:
        return df
    old = df["no_window"].isna() if "no_window" in df else pd.Series(True, index=df.index)
    if not old.any():
        return df
    figures = {c: _delivered(out / "cells" / c) for c in df.loc[old, "cell"].unique()}
    read = {k: df["cell"].map({c: f[k] for c, f in figures.items()}) for k in KEYS}
    return df.assign(**{k: df[k].where(~old, read[k]) if k in df else read[k] for k in KEYS})


def run_study(name: str, out_dir: str | os.PathLike[str], jobs: int = 2,
              figures: str | os.PathLike[str] | None = None,
              on_done: Callable[[Any, dict[str, Any]], None] | None = None,
              spec: dict[str, Any] | None = None) -> StudyResult:
    """Run the study's sweep into OUT_DIR/NAME (resuming), summarise it and draw
    its figure (FIGURES/whatif_NAME.png, default OUT_DIR/NAME). `spec` replaces
    the study's spec file (a parsed TOML table, e.g. a smaller grid for a test)."""
    from harness.core.files import provenance, write_atomic
    from harness.core.registry import unknown_name
    from harness.studies.sweep import read_result, run_sweep

    if name not in STUDIES:
        raise unknown_name("what-if study", name, study_names())
    study = STUDIES[name]
    table = read_spec(name) if spec is None else spec
    sweep = study_sweep(name, table)
    out = Path(out_dir) / name
    start = time.perf_counter()
    ran = run_sweep(sweep, out, jobs, on_done=on_done)
    wall = time.perf_counter() - start if ran else 0.0
    failed = [c.key for c in sweep.cells if (r := read_result(out, c)) and r.get("error")]
    reading = time.perf_counter()
    if study.runs is not None:  # the study reads its cells' traces itself
        df = study.runs(table, sweep, out, jobs)
    else:
        df = pd.read_parquet(out / "results.parquet")
        if "error" in df:
            df = df[df["error"].isna()].drop(columns="error")
        if "groups" not in df:  # R, for ratios (a column only when the spec varies it)
            df["groups"] = df["cell"].map({c.key: c.config.groups for c in sweep.cells})
        df = with_yardstick(df, out)
    reading = time.perf_counter() - reading
    with late_stage(f"{name}: summarising {len(df):,} rows"):  # said once it runs 3 s
        summary = study.summarise(df)
        write_atomic(out / "summary.csv", summary.to_csv(index=False, float_format="%.6g"))
        if study.report is not None:  # from the CSV as written, so that it reads as the
            # study's `python -m` on summary.csv prints it, to the last digit
            write_atomic(out / "summary.md", study.report(pd.read_csv(out / "summary.csv")))
    figure = Path(figures or out) / f"whatif_{name}.png"
    with late_stage(f"drawing {figure}"):
        study.draw(df, figure)
    result = StudyResult(name, out, figure, summary, len(sweep.cells), len(ran), len(failed),
                         wall, jobs)
    if ran:  # keep the wall time of the run that computed the cells
        info = {"study": name, "cells": len(sweep.cells), "ran": len(ran),
                "failed": len(failed), "jobs": jobs, "wall_s": round(wall, 2),
                "cpus": os.cpu_count(), **provenance()}
        if study.runs is not None:  # its traces read after the sweep (cached for reruns)
            info["traces_s"] = round(reading, 2)
        write_atomic(out / "study.json", json.dumps(info, indent=2) + "\n")
    return result
