"""What the speculative-rollout papers share: their runs on the simulator, read with SkyRL's
timers (`skyrl_spec.runs.summary`: a round's generate, policy train and step seconds, the
first round left out), since each paper's baseline is a synchronous verl loop like SkyRL's;
and where a speculative step stops paying (`crossover`), the batch a toggle switches at."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from harness.core.config import RunConfig
from harness.core.trace_io import trace_file
from harness.studies.reproduce.grid import run_configs
from harness.studies.reproduce.skyrl_spec.runs import summary

BATCHES = tuple(range(1, 4097))


def simulate(runs: list[tuple[str, RunConfig]], traces: Path, label: str,
             progress: bool = True) -> pd.DataFrame:
    """The named runs, one row each (`run`, then the timers' means)."""
    tasks = []
    for name, cfg in runs:
        folder = traces / name  # made only if the traces are kept (execute)
        tasks.append((cfg.validate(), trace_file(folder, cfg.system)))
    rows = run_configs(tasks, label=label, progress=progress, reader=summary)
    return pd.DataFrame([{"run": name, **row}
                         for (name, _), row in zip(runs, rows, strict=True)])


def crossover(sim: Any, context: int) -> int:
    """The largest batch (of 1..4,096) up to which one speculative step of `sim`'s engine
    yields at least the tokens a second of plain steps, each sequence holding `context` tokens:
    the simulator's own step model says where speculation stops paying, as a roofline toggle
    does (0: never pays). `sim` must have a drafter on."""
    from harness.studies.steps import step_rows

    gains = [r["speedup"] for r in step_rows(sim, list(BATCHES), [context])]
    losing = [b for b, g in zip(BATCHES, gains, strict=True) if g < 1.0]
    return min(losing, default=BATCHES[-1] + 1) - 1
