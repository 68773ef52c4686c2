"""Throughput collapse: generation does not slow to a trickle after a barrier.

Barriers are the points where a scheduler makes generation wait on training: a
weight publication (`weights_published`) and a rollout boundary (`rollout_start`).
They cut the run into phases (barriers at the same instant are one); each phase's
rate is the tokens generated in it over its length, a request's new tokens spread
evenly over its attempt (admitted, else submitted, to finished). Left out: phases in
which no request is in flight (the engine waits on the trainer or is being rebuilt);
phases after the last `request_submit` (the run draining its last requests, which
slows any schedule); and, where requests are outstanding at the barrier, the time
until the next new request is submitted: only they run in it, fewer and fewer, as at
the run's end. That is the whole phase when no new request comes until every one of
them has ended (a batch drains) or until the phase has ended; else the phase is
judged from that submission on. A request is outstanding from its first attempt to
its last finish; one aborted at a barrier and sent again with its tokens (AReaL's
interrupted generation, SortedRL's cached work, verl-dynamic's moved requests) is the
same work, not a new request. Such a stretch's rate falls with the work left, not
because of the barrier: SortedRL's round after its first early update and AReaL's
last requests, resumed after its last weight update, fell below a fifth at R = 16,
U = 4 (0.18 and 0.19) with no collapse; so did Laminar's 200-round run on two
replicas (0.108), where both rollouts were in their batches' tails (each pulls new
prompts only when its own batch is done) and the other had not pulled yet.
prime-rl's collapse submits new requests in the slow phase (one group per group
finished), so it is judged, from the first one. The limit: a scheduler that admits
nothing after a barrier for a whole phase, or until its batch has drained, looks
like a drain and is not flagged; a scheduler's trickle is caught once it admits.

Each phase after a barrier is compared with the median rate of the phases before
it; it fails when one falls below `RATIO` (1/5) of that median. Why a fifth:
PrimeIntellect-ai/prime-rl#1372 (https://github.com/PrimeIntellect-ai/prime-rl/pull/
1372) reports the collapse it fixed as ~15k to ~500 tok/s after the first
`max_async_level` barrier (one group refilled per group finished instead of
refilling to the batch's capacity), a thirtieth; the phases of the harness's own
systems on the simulator's workloads stay within a factor of about 2 of each other
(tests/test_check.py runs them). The value is the lowest ratio found.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.analysis.check.model import TraceView
from harness.analysis.check.result import Result, offence, unjudged

NAME = "throughput"
RATIO = 0.2
SOURCE = "x the median phase before"
BARRIERS = ("weights_published", "rollout_start")


def attempts(events: Sequence[dict[str, Any]]) -> list[tuple[float, float, int]]:
    """(start, end, new tokens) of every request attempt."""
    start: dict[tuple[int, int], float] = {}
    resumed: dict[tuple[int, int], int] = {}
    out = []
    for e in events:
        ev = e["ev"]
        if ev in ("request_submit", "request_admit"):
            key = (e["group"], e["sample"])
            if ev == "request_submit":
                start[key], resumed[key] = e["t"], e.get("resumed_tokens", 0)
            elif key in start:
                start[key] = e["t"]
        elif ev == "request_finish":
            key = (e["group"], e["sample"])
            if key in start:
                out.append((start.pop(key), e["t"], e["response_tokens"] - resumed.pop(key)))
    return out


class Work:
    """Each request's first submission and last finish (indices into the events): a
    request is outstanding from its first attempt until it ends for good, across the
    attempts an abort splits it into."""

    def __init__(self, events: Sequence[dict[str, Any]]) -> None:
        first: dict[tuple[int, int], int] = {}
        last: dict[tuple[int, int], int] = {}
        for i, e in enumerate(events):
            if e["ev"] in ("request_submit", "request_finish"):
                key = (e["group"], e["sample"])
                if e["ev"] == "request_submit":
                    first.setdefault(key, i)
                elif key in first:
                    last[key] = i
        self.spans = sorted((first[k], last.get(k, len(events))) for k in first)
        self.firsts = [f for f, _ in self.spans]
        self.times = [events[f]["t"] for f in self.firsts]

    def judged_from(self, index: int, start: float, end: float) -> float | None:
        """Where the phase from the barrier `index` (at `start`, to `end`) is judged
        from, or None where it is left out. Where requests are outstanding at the
        barrier, the time until the next request is submitted holds only them, running
        down as at the run's end: left out. All of the phase when that time outlasts
        every one of them (a batch drains) or the phase itself; else the phase is judged
        from that submission on (one rollout among several draining its batch while
        another has not yet pulled: Laminar's replicas each take new prompts only when
        their own batch is done)."""
        held = [stop for _, stop in self.spans[:bisect.bisect_left(self.firsts, index)]
                if stop > index]
        if not held:
            return start
        after = bisect.bisect_right(self.firsts, index)
        if after == len(self.firsts) or self.firsts[after] > max(held):
            return None
        return None if self.times[after] >= end else max(start, self.times[after])


def phase_rates(view: TraceView) -> list[tuple[int, float, float, float]]:
    """(barrier index, start, end, tokens/s) of every phase the check judges."""
    events = view.events
    cuts: list[tuple[int, float]] = []
    for i, e in enumerate(events):
        if e["ev"] in BARRIERS and (not cuts or e["t"] > cuts[-1][1]):
            cuts.append((i, e["t"]))
    submits = [e["t"] for e in events if e["ev"] == "request_submit"]
    if not submits:
        return []
    last = max(submits)
    work = Work(events)
    done = np.array(attempts(events), dtype=float).reshape(-1, 3)
    s, f, n = done[:, 0], done[:, 1], done[:, 2]
    span = np.where(f > s, f - s, 1.0)
    out = []
    for (index, barrier), (_, b) in zip(cuts, cuts[1:], strict=False):
        a = work.judged_from(index, barrier, b) if b <= last and b > barrier else None
        if a is None:
            continue
        busy = ((s < b) & (f > a)) | ((s == f) & (f >= a) & (f < b))
        if not busy.any():
            continue
        share = np.where(f > s, (np.minimum(b, f) - np.maximum(a, s)) / span, 1.0)
        tokens = float((n * share)[busy].sum())
        out.append((index, a, b, tokens / (b - a)))
    return out


def check(view: TraceView) -> Result:
    meta = view.head.get("import")
    if isinstance(meta, dict) and meta.get("timed") is False:
        return unjudged(NAME, "ratio", SOURCE, "an untimed import: no times to judge")
    phases = phase_rates(view)
    if len(phases) < 2:
        return unjudged(NAME, "ratio", SOURCE,
                        f"{len(phases)} phase(s) between barriers: nothing to compare")
    lowest = float("inf")
    first = None
    for n in range(1, len(phases)):
        before = statistics.median(r for *_, r in phases[:n])
        index, _, _, rate = phases[n]
        if before <= 0:
            continue
        ratio = rate / before
        lowest = min(lowest, ratio)
        if ratio < RATIO and first is None:
            first = offence(view.events[index])
            first["rate"], first["median_before"] = round(rate, 3), round(before, 3)
    if lowest == float("inf"):
        return unjudged(NAME, "ratio", SOURCE, "no tokens generated before a barrier")
    return Result(NAME, first is None, round(lowest, 4), "ratio", RATIO, SOURCE,
                  f"{len(phases)} phases between barriers; lowest rate / median before "
                  f"= {lowest:.2f}", first)
