"""The trainer of a timed run, fitted to its own training spans, where it has them.

Why: the twin's trainer otherwise comes from the stated cluster's GPUs at an MFU
fitted to another paper's hardware. A trace whose source timed its training
(any rolloutbench run; a veRL run imported with its metrics file) says how long
each batch took: the fit is the simulator's measured trainer (`[train]`),

    batch seconds = seconds_per_token * tokens + per_token_squared_s * sum(length^2) + c

by non-negative least squares over the batches (the squares: each trained sequence's
prompt and response, as attention's cost grows; linear in tokens alone, a simulated
CGP run's batches were fitted to 5.4% median, with them 2.0%); a step's optimizer time
is c plus the
median gap from a step's last batch's end to the step (the simulator's and the live
trainer's optimizer runs there, outside the batch's span: a fit of the spans alone
found no step time, and a simulated run's own twin trained 6.9% faster than the run);
weight publication is the mean gap between an optimizer step and the publication of
its version. A trace with
no training spans (slime's dumps, AReaL's records) gives None: the twin's
trainer is then the stated cluster's, and the first line of output says so.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.core.trace import iter_trace
from harness.studies.twin.engine_fit import relative_nnls


@dataclass(frozen=True)
class TrainerFit:
    seconds_per_token: float
    per_token_squared_s: float  # attention: seconds per sequence's squared length
    optimizer_s: float
    weight_sync_s: float | None  # None: the trace records no publication
    batches: int
    median_error: float  # per batch, |predicted - measured| / measured

    def describe(self) -> str:
        sync = ("" if self.weight_sync_s is None
                else f", weight sync {self.weight_sync_s:.2f} s")
        return (f"trainer: fitted to the run's {self.batches} batches: "
                f"{self.seconds_per_token * 1e6:.2f} us/token + "
                f"{self.per_token_squared_s * 1e9:.2f} ns/token^2 of a sequence + "
                f"{self.optimizer_s:.2f} s a step{sync}; error median {self.median_error:.1%}")

    def train_table(self) -> dict[str, float]:
        """The calibration `[train]` table the simulated trainer reads."""
        return {"seconds_per_token": self.seconds_per_token, "per_sequence_s": 0.0,
                "per_token_squared_s": self.per_token_squared_s,
                "optimizer_s": self.optimizer_s}


def fit_trainer(path: Path) -> TrainerFit | None:
    """The trainer fit of the trace at `path`, or None when it times no training."""
    tokens_of_group: dict[int, int] = defaultdict(int)
    squares_of_group: dict[int, int] = defaultdict(int)  # its sequences' lengths squared
    prompt_of: dict[tuple[int, int], int] = {}
    groups_of: dict[int, list[int]] = {}
    start: dict[int, float] = {}
    spans: list[tuple[float, float, float]] = []  # (tokens, squares, seconds)
    stepped: dict[int, float] = {}
    syncs: list[float] = []
    ended: float | None = None  # the last batch's end, until a step takes it
    gaps: list[float] = []  # a batch's end to its optimizer step
    for ev in iter_trace(path, allow_cut=True):  # a run killed mid-line: as far as it goes
        kind = ev["ev"]
        if kind == "request_finish" and ev["status"] == "finished":
            tokens_of_group[ev["group"]] += ev["response_tokens"]
            length = prompt_of.get((ev["group"], ev["sample"]), 0) + ev["response_tokens"]
            squares_of_group[ev["group"]] += length * length
        elif kind == "request_submit":
            fresh = ev.get("resumed_tokens", 0) == 0
            tokens_of_group[ev["group"]] += ev["prompt_tokens"] if fresh else 0
            if fresh:
                prompt_of[(ev["group"], ev["sample"])] = ev["prompt_tokens"]
        elif kind == "batch_dispatch":
            groups_of[ev["batch"]] = list(ev.get("groups", []))
        elif kind == "train_start":
            start[ev["batch"]] = ev["t"]
        elif kind == "train_end" and ev["batch"] in start:
            groups = groups_of.get(ev["batch"], [])
            tokens = ev.get("tokens") or sum(tokens_of_group[g] for g in groups)
            if tokens and ev["t"] > start[ev["batch"]]:
                spans.append((float(tokens), float(sum(squares_of_group[g] for g in groups)),
                              ev["t"] - start[ev["batch"]]))
            ended = ev["t"]
        elif kind == "optimizer_step":
            stepped[ev["version"]] = ev["t"]
            if ended is not None:
                gaps.append(ev["t"] - ended)
                ended = None
        elif kind == "weights_published" and ev["version"] in stepped:
            syncs.append(ev["t"] - stepped[ev["version"]])
    if not spans:
        return None
    tokens, squares, seconds = (np.array(c) for c in zip(*spans, strict=True))
    x = np.column_stack([tokens, squares, np.ones(len(tokens))])
    theta = relative_nnls(x, seconds)
    error = float(np.median(np.abs(x @ theta - seconds) / seconds))
    step = float(theta[2]) + (float(np.median(gaps)) if gaps else 0.0)
    return TrainerFit(float(theta[0]), float(theta[1]), step,
                      float(np.mean(syncs)) if syncs else None, len(spans), error)
