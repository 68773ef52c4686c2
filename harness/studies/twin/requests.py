"""The engine requests of a trace, as spans an engine fit can use.

A request is one attempt of one sample: submitted, admitted (its prefill began),
maybe its first token, finished or aborted. Why its own reading of the trace:
`metrics` wants rounds and batches, a fit wants every request's window on the
engine and what it did there (tokens prefilled, tokens decoded), including the
aborted attempts of an over-sampled or partial rollout, which occupy the engine
as much as the kept ones.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.trace import iter_trace


@dataclass(frozen=True)
class Requests:
    """One row per attempt that was admitted and ended, as arrays (seconds, tokens)."""

    engine: np.ndarray  # the engine that served it (-1: the trace does not say)
    admit: np.ndarray  # its prefill began (the submission when no admission is recorded)
    first_token: np.ndarray  # its first token (NaN: not recorded)
    finish: np.ndarray
    prefill: np.ndarray  # tokens prefilled: the prompt and any carried prefix
    decoded: np.ndarray  # tokens generated in this attempt
    admitted: bool  # the trace records admissions (else `admit` is the submission)

    def __len__(self) -> int:
        return len(self.finish)

    @property
    def engines_known(self) -> bool:
        return bool(len(self) and (self.engine >= 0).all())


def read_requests(path: Path) -> tuple[Requests, dict[str, Any]]:
    """Every attempt of the trace at `path` with a finish after its admission, and the
    trace's header. A (group, sample) submitted twice (a resumed partial rollout) is
    two attempts, each admission and finish paired with the latest submission."""
    header: dict[str, Any] = {}
    open_: dict[tuple[int, int], deque[dict[str, Any]]] = defaultdict(deque)
    rows: list[tuple[int, float, float, float, int, int]] = []
    admitted_any = False
    for ev in iter_trace(path, allow_cut=True):  # a run killed mid-line: as far as it goes
        kind = ev["ev"]
        if kind == "run_start":
            header = ev
            continue
        if kind not in ("request_submit", "request_admit", "request_finish"):
            continue
        key = (ev["group"], ev["sample"])
        if kind == "request_submit":
            open_[key].append({"submit": ev["t"], "prompt": ev["prompt_tokens"],
                               "resumed": ev.get("resumed_tokens", 0),
                               "engine": ev.get("engine", -1)})
            continue
        if not open_[key]:
            continue  # an event of a request the trace never submitted: not ours to fit
        req = open_[key][-1]
        if kind == "request_admit":
            admitted_any = True
            req["admit"] = ev["t"]
            req["engine"] = ev.get("engine", req["engine"])
            continue
        open_[key].pop()
        start = req.get("admit", req["submit"])
        made = ev["response_tokens"] - req["resumed"]
        if ev["t"] <= start or made < 1:
            continue  # nothing decoded, or no time to fit
        first = ev.get("first_token_t", float("nan"))
        rows.append((int(req["engine"] if req["engine"] is not None else -1), start,
                     float(first), ev["t"], req["prompt"] + req["resumed"], made))
    cols = list(zip(*rows, strict=True)) if rows else [()] * 6
    return Requests(np.array(cols[0], dtype=int), np.array(cols[1], dtype=float),
                    np.array(cols[2], dtype=float), np.array(cols[3], dtype=float),
                    np.array(cols[4], dtype=float), np.array(cols[5], dtype=float),
                    admitted_any), header
