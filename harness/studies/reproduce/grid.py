"""Running a grid of simulated configurations with a progress bar.

Inside `rolloutbench reproduce` with more than one job, the runs go to the
reproduction's process pool (`harness.studies.reproduce.pool`), which also reports
progress; anywhere else they run here, one after another.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from harness.core.config import RunConfig
from harness.core.metrics import KEYS, OFFPOLICY_KEYS
from harness.core.progress import Bar
from harness.core.trace_io import trace_file
from harness.run.execute import Reader

COLUMNS = ["system", "workload", "groups", "round", *KEYS, *OFFPOLICY_KEYS]  # a grid's rows


def run_configs(tasks: list[tuple[RunConfig, Path]], label: str = "simulating",
                progress: bool = True, reader: Reader | None = None) -> list[Any]:
    """Run each (config, trace path); returns each run's metric rows, in order, or
    what `reader` (a module-level function, so that it travels to a worker
    process) makes of its events. The configs must be validated; the traces'
    folders must exist."""
    from harness.studies.reproduce import pool

    active = pool.active()
    if active is not None:
        return active.run(tasks, label, reader)
    out = []
    with Bar(label, len(tasks), enabled=progress) as bar:  # piped: one line
        for cfg, path in tasks:
            out.append(pool.run_one(cfg, path, reader)[0])
            bar.advance()
    return out


def run_grid(
    base: RunConfig,
    axes: dict[str, Iterable[Any]],
    traces: Path,
    label: str = "simulating",
    progress: bool = True,
) -> pd.DataFrame:
    """Run every combination of `axes` (RunConfig field -> values) on top of
    `base`; returns one row per run and round. Traces go to `traces/`."""
    tasks = grid_tasks(base, axes, traces)
    return grid_frame(tasks, run_configs(tasks, label, progress))


def grid_tasks(base: RunConfig, axes: dict[str, Iterable[Any]], traces: Path
               ) -> list[tuple[RunConfig, Path]]:
    """`run_grid`'s runs: each combination's validated config and trace path (the
    folder made only if the traces are kept: harness.run.execute)."""
    names = list(axes)
    tasks = []
    for values in itertools.product(*(list(v) for v in axes.values())):
        cfg = copy.deepcopy(base)
        for name, value in zip(names, values, strict=True):
            setattr(cfg, name, value)
        cfg.validate()
        stem = "-".join(f"{v}" for v in values)
        tasks.append((cfg, trace_file(traces, stem)))
    return tasks


def grid_frame(tasks: list[tuple[RunConfig, Path]], results: list[list[dict[str, Any]]]
               ) -> pd.DataFrame:
    """`run_grid`'s table from its runs' metric rows."""
    rows = [{"groups": cfg.groups, **row}
            for (cfg, _), run in zip(tasks, results, strict=True) for row in run]
    return pd.DataFrame(rows)[COLUMNS]
