"""What the speculative-rollout papers share: their runs on the simulator, read with SkyRL's
timers (`skyrl_spec.runs.summary`: a round's generate, policy train and step seconds, the
first round left out), since each paper's baseline is a synchronous verl loop like SkyRL's."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.config import RunConfig
from harness.core.trace_io import trace_file
from harness.studies.reproduce.grid import run_configs
from harness.studies.reproduce.skyrl_spec.runs import summary


def simulate(runs: list[tuple[str, RunConfig]], traces: Path, label: str,
             progress: bool = True) -> pd.DataFrame:
    """The named runs, one row each (`run`, then the timers' means)."""
    tasks = []
    for name, cfg in runs:
        folder = traces / name
        folder.mkdir(parents=True, exist_ok=True)
        tasks.append((cfg.validate(), trace_file(folder, cfg.system)))
    rows = run_configs(tasks, label=label, progress=progress, reader=summary)
    return pd.DataFrame([{"run": name, **row}
                         for (name, _), row in zip(runs, rows, strict=True)])
