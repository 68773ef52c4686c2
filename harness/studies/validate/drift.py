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
from dataclasses import dataclass
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


FIT_RMS_LIMIT = 0.10
"""A decode fit looser than this over its own microbenchmarks measured a busy
machine more than the engine."""
ATTEMPTS = 3  # calibrations measured before validating on the best of them anyway
NOISE_FLOOR = 0.05  # the least disagreement called one: two probes rarely agree closer


@dataclass(frozen=True)
class Check:
    """A fresh calibration against two probes taken just after it."""

    fit_rms: float  # the decode fit over its own microbenchmarks, relative rms
    level: float  # the probes over the fit: geometric mean of step / predicted
    noise: float  # one probe's own noise: rms of log(first / second) over sqrt(2)
    tolerance: float  # |log level| allowed: fit_rms + 3 x noise, at least NOISE_FLOOR

    @property
    def fit_ok(self) -> bool:
        return self.fit_rms <= FIT_RMS_LIMIT

    @property
    def probes_ok(self) -> bool:
        return abs(math.log(self.level)) <= self.tolerance

    @property
    def ok(self) -> bool:
        return self.fit_ok and self.probes_ok

    def why(self) -> str:
        """What is wrong with it, in words ('' when nothing)."""
        parts = []
        if not self.fit_ok:
            parts.append(f"its fit is {self.fit_rms:.1%} rms over its own microbenchmarks "
                         f"(limit {FIT_RMS_LIMIT:.0%})")
        if not self.probes_ok:
            parts.append(f"two probes just after it read {self.level:.2f}x its fit (within "
                         f"{math.exp(-self.tolerance):.2f}-{math.exp(self.tolerance):.2f}x "
                         f"allowed by the fit and the probes' noise, {self.noise:.1%})")
        return "; ".join(parts)


def check(decode: dict[str, float], first: list[dict[str, float]],
          second: list[dict[str, float]]) -> Check:
    """Is a calibration one to validate on? Two probes (`probe_decode` rows: batch,
    context_tokens, step_s), taken one after the other just after it, must agree
    with its fit within the fit's own residual plus three times a probe's noise
    (read from how far the two disagree with each other)."""
    ratios = [row["step_s"] / predicted(decode, row["batch"], row["context_tokens"])
              for row in (*first, *second)]
    level = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    pairs = [math.log(a["step_s"] / b["step_s"]) for a, b in zip(first, second, strict=True)]
    noise = math.sqrt(sum(p * p for p in pairs) / len(pairs) / 2)
    fit_rms = float(decode.get("fit_rel_rms", 0.0))
    return Check(fit_rms, level, noise, max(NOISE_FLOOR, fit_rms + 3 * noise))
