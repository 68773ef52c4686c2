"""Drift: is the machine the one the calibration measured, when a cell runs?

`validate` calibrates once, before the grid, and a grid lasts half an hour on
shared machines whose speed moves by tens of percent. So beside every cell
(just before and just after it) the decode step is re-measured for a few seconds
(`harness.live.measure.probe_decode`). Each probe is set against what the
calibration predicts for its shapes (`ratio`: how well the fit holds there) and
against the grid's first probe, taken just after the calibration (`drift`: how
far the machine has moved since). A cell's drift is the geometric mean over its
two probes: 1.0 when the machine held still, whatever the fit's bias.

The twin is simulated twice: with the grid's calibration (the headline error)
and with its decode step scaled by the cell's probes over the fit (`ratio`): the
step re-measured beside the cell, applied through the simulator's probe knob
(`harness.sim.knobs`, every batch). Both are microbenchmark facts, none read
from the validation runs, so what error the second twin keeps is the step
model's, and what it loses was the machine's.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from harness.sim import calibration as calibrations
from harness.sim.knobs import Knobs
from harness.sim.perf import DecodeModel


def predicted(decode: dict[str, float], batch: int, context_tokens: float) -> float:
    """The simulator's decode step, from this calibration, for `batch` sequences
    holding `context_tokens`."""
    return DecodeModel.measured(decode).steps_time(1, batch, context_tokens)


def decode_of(calibration: Path) -> dict[str, float]:
    return calibrations.load(str(calibration))["decode"]


def probed_knobs(factor: float, max_running: int) -> Knobs:
    """Every decode step (an engine runs at most `max_running` sequences) times
    `factor`; prefill and admission as calibrated."""
    return Knobs(small_batch_scale=factor, small_batch=max_running)


def table(rows: list[dict[str, Any]], calibration: Path) -> pd.DataFrame:
    """Probe rows (cell, when, batch, context_tokens, step_s, in the order taken) with
    the calibration's prediction, their ratio, and the drift: the step over the first
    probe's at the same batch."""
    frame = pd.DataFrame(rows)[["cell", "when", "batch", "context_tokens", "step_s"]]
    decode = decode_of(calibration)
    frame["predicted_s"] = [predicted(decode, b, c)
                            for b, c in zip(frame.batch, frame.context_tokens, strict=True)]
    frame["ratio"] = frame.step_s / frame.predicted_s
    first = frame.groupby("batch", sort=False).step_s.transform("first")
    frame["drift"] = frame.step_s / first
    return frame


def per_cell(probes: pd.DataFrame, column: str = "ratio") -> dict[str, float]:
    """Each cell's geometric mean of its probes' `column`: `ratio`, the step over the
    fit (what its twin is scaled by), or `drift`, over the grid's first probe."""
    return {cell: math.exp(part[column].map(math.log).mean())
            for cell, part in probes.groupby("cell", sort=False)}
