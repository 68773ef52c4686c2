"""Drift: is the machine the one the calibration measured, when a cell runs?

`validate` calibrates once, before the grid, and a grid lasts half an hour on
shared machines whose speed moves by tens of percent. So beside every cell
(just before and just after it) the decode step is re-measured for a few seconds
(`harness.live.measure.probe_decode`). Each probe is set against what the
calibration predicts for its shapes (`ratio`: how well the fit holds there) and
against the grid's first probe, taken just after the calibration (`drift`: how
far the machine has moved since). A cell's drift is the geometric mean over its
two probes: 1.0 when the machine held still, whatever the fit's bias.

Both are reported beside the errors (summary.md, probe.csv), with how closely a
cell's drift follows its live-over-simulated rollout time. A twin re-simulated
with its cell's drift was tried and dropped: a few seconds of probing is as
noisy as the drift it would take out (docs/validation.md).
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

import pandas as pd


def predicted(decode: dict[str, float], batch: float, context_tokens: float) -> float:
    """The calibration's decode step for `batch` sequences holding `context_tokens`."""
    return (decode["fixed_s"] + decode["per_seq_s"] * batch
            + decode["per_ctx_token_s"] * context_tokens)


def decode_of(calibration: Path) -> dict[str, float]:
    with open(calibration, "rb") as fh:
        return tomllib.load(fh)["decode"]


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


def per_cell(probes: pd.DataFrame) -> dict[str, float]:
    """Each cell's drift: the geometric mean of its probes' drifts."""
    return {cell: math.exp(part["drift"].map(math.log).mean())
            for cell, part in probes.groupby("cell", sort=False)}
