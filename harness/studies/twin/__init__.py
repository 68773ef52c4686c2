"""The twin of a user's run: its schedule and its engine, read from its own trace.

`counterfactual` replays a run's work under every system. Its answers mean
something only if the simulated twin of the run itself reproduces what the run
measured, which needs the run's schedule (`schedule`: what the run did with
over-sampling and partial rollouts) and the run's engine and trainer
(`engine_fit`, `trainer_fit`: step and training times fitted to the run's own
requests and batches, written as a calibration file the simulator reads,
`calibration_file`). Where a trace holds no times there is nothing to fit, and
the cluster must be stated.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.studies.twin.engine_fit import EngineFit, FitError, decode_table, fit_engine
from harness.studies.twin.requests import read_requests
from harness.studies.twin.trainer_fit import TrainerFit, fit_trainer

__all__ = ["Fitted", "FitError", "fit_run", "calibration_file"]


@dataclass(frozen=True)
class Fitted:
    """A run's fitted engine, and its trainer where the trace timed one."""

    engine: EngineFit | None  # None: the trace cannot fit one (`why`)
    trainer: TrainerFit | None  # None: the trace times no training
    why: str = ""

    def describe(self) -> list[str]:
        engine = self.engine.describe() if self.engine is not None else [f"engine: {self.why}"]
        trainer = [self.trainer.describe()] if self.trainer is not None else []
        return [*engine, *trainer]


def fit_run(trace: Path, engines: int) -> Fitted:
    """Fit the run's engine (spread over `engines` replicas where the trace does not
    say which served a request) and, where it has training spans, its trainer."""
    requests, _ = read_requests(trace)
    try:
        engine, why = fit_engine(requests, engines), ""
    except FitError as err:
        engine, why = None, str(err)
    return Fitted(engine, fit_trainer(trace), why)


def _toml(tables: dict[str, dict[str, Any]], comments: list[str]) -> str:
    lines = [f"# {c}" for c in comments]
    for name, table in tables.items():
        lines += ["", f"[{name}]"]
        lines += [f"{k} = {v!r}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def calibration_file(fitted: Fitted, params: dict[str, float], trace: Path) -> str:
    """The calibration TOML the twin and every counterfactual system run on: the
    stated cluster's parameters (`params`, resolved) with the fitted `[decode]` (and
    `[train]`, with no per-micro-batch overhead beside it: the fit holds it all)."""
    fixed = dict(params)
    tables: dict[str, dict[str, Any]] = {"fixed": fixed}
    if fitted.engine is not None:
        tables["decode"] = decode_table(fitted.engine)
    if fitted.trainer is not None:
        tables["train"] = fitted.trainer.train_table()
        fixed["micro_overhead_s"] = 0.0
        if fitted.trainer.weight_sync_s is not None:
            fixed["weight_sync_s"] = fitted.trainer.weight_sync_s
    return _toml(tables, [f"Written by `rolloutbench counterfactual`: fitted to {trace}.",
                          *fitted.describe(),
                          "[decode] (and [train]) replace the step and trainer models; "
                          "[fixed] is the stated cluster's calibration."])
