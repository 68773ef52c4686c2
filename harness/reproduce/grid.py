"""Running a grid of simulated configurations with a progress bar."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from harness.config import RunConfig
from harness.metrics import KEYS, OFFPOLICY_KEYS
from harness.progress import Bar
from harness.results import execute


def run_grid(
    base: RunConfig,
    axes: dict[str, Iterable[Any]],
    traces: Path,
    label: str = "simulating",
    progress: bool = True,
) -> pd.DataFrame:
    """Run every combination of `axes` (RunConfig field -> values) on top of
    `base`; returns one row per run and round. Traces go to `traces/`."""
    traces.mkdir(parents=True, exist_ok=True)
    names = list(axes)
    combos = list(itertools.product(*(list(v) for v in axes.values())))
    rows: list[dict[str, Any]] = []
    with Bar(label, len(combos), enabled=progress) as bar:  # piped: one line
        for values in combos:
            cfg = copy.deepcopy(base)
            for name, value in zip(names, values, strict=True):
                setattr(cfg, name, value)
            cfg.validate()
            stem = "-".join(f"{v}" for v in values)
            for row in execute(cfg, traces / f"{stem}.jsonl"):
                rows.append({"groups": cfg.groups, **row})
            bar.advance()
    cols = ["system", "workload", "groups", "round", *KEYS, *OFFPOLICY_KEYS]
    return pd.DataFrame(rows)[cols]
