"""Drift: is the machine the one the calibration measured, when a cell runs?

`validate` calibrates once, before the grid, and a grid lasts half an hour on
shared machines whose speed moves by tens of percent. So beside every cell
(just before and just after it) the decode step is re-measured for a few seconds
(`harness.live.measure.probe_decode`) and set against what the calibration
predicts for those shapes. A cell's drift is the geometric mean of measured over
predicted across its two probes: 1.0 when the machine held still.

The simulated twin keeps the grid's calibration (the headline error). A second
twin runs with the decode step scaled by the cell's drift: both are microbenchmark
facts, none read from the validation runs, so what error remains with the drift
taken out is the step model's, and what goes away was the machine's.
"""

from __future__ import annotations

import math
import re
import tomllib
from pathlib import Path
from typing import Any

import pandas as pd

SCALED = ("fixed_s", "per_seq_s", "per_ctx_token_s")  # the decode step's terms


def predicted(decode: dict[str, float], batch: float, context_tokens: float) -> float:
    """The calibration's decode step for `batch` sequences holding `context_tokens`."""
    return (decode["fixed_s"] + decode["per_seq_s"] * batch
            + decode["per_ctx_token_s"] * context_tokens)


def decode_of(calibration: Path) -> dict[str, float]:
    with open(calibration, "rb") as fh:
        return tomllib.load(fh)["decode"]


def table(rows: list[dict[str, Any]], calibration: Path) -> pd.DataFrame:
    """Probe rows (cell, when, batch, context_tokens, step_s) with the calibration's
    prediction and the ratio of the two."""
    frame = pd.DataFrame(rows)
    decode = decode_of(calibration)
    frame["predicted_s"] = [predicted(decode, b, c)
                            for b, c in zip(frame.batch, frame.context_tokens, strict=True)]
    frame["ratio"] = frame.step_s / frame.predicted_s
    return frame


def per_cell(probes: pd.DataFrame) -> dict[str, float]:
    """Each cell's drift: the geometric mean of its probes' ratios."""
    return {cell: math.exp(part.ratio.map(math.log).mean())
            for cell, part in probes.groupby("cell", sort=False)}


def scaled(calibration: Path, factor: float, out: Path) -> Path:
    """A copy of `calibration` with the decode step's terms times `factor`."""
    lines, section = [], ""
    for line in calibration.read_text().splitlines():
        head = re.match(r"\[(\w+)\]", line)
        section = head.group(1) if head else section
        key = line.split("=", 1)[0].strip()
        if section == "decode" and key in SCALED:
            line = f"{key} = {float(line.split('=', 1)[1]) * factor!r}"
        lines.append(line)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"# {calibration.name}, decode step x {factor:.4f} (drift probe)\n"
                   + "\n".join(lines) + "\n")
    return out
