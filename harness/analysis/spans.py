"""Intervals rebuilt from a trace: request attempts, groups, trainer spans.

The trace records instants (submit, admit, preempt, finish, ...); the timeline
and the Gantt figure both need the intervals between them, so both rebuild them
here, the same way. A request *attempt* runs from one `request_submit` to the
`request_finish` that ends it: a request aborted and resumed later (APRIL's
partial rollouts, a replica released by `engine_resize`) is two attempts.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

Interval = tuple[float, float]


@dataclass
class Attempt:
    """One submit→finish of a request. `running` are the admit→preempt/finish
    intervals, `waiting` the submit→admit and preempt→readmit ones: the engine
    state the counters are derived from."""

    group: int
    sample: int
    round: int
    engine: int
    submit: float
    prompt_tokens: int
    resumed_tokens: int
    end: float = float("nan")  # the finish, or the end of the trace when unfinished
    status: str = "unfinished"  # finished, aborted, or unfinished (no request_finish)
    response_tokens: int | None = None
    running: list[Interval] = field(default_factory=list)
    waiting: list[Interval] = field(default_factory=list)
    preempts: int = 0
    _since: float = 0.0  # when the current running/waiting interval began
    _state: str = "waiting"

    @property
    def key(self) -> tuple[int, int]:
        return (self.group, self.sample)

    def _close(self, t: float) -> None:
        (self.running if self._state == "running" else self.waiting).append((self._since, t))
        self._since = t

    @property
    def first_admit(self) -> float | None:
        return self.running[0][0] if self.running else None


@dataclass
class Group:
    """A group's milestones: first submit, serving-complete, materialised (trainable),
    dispatched in a batch (handed to the trainer)."""

    group: int
    round: int
    first_submit: float
    last_finish: float
    complete: float | None = None
    materialized: float | None = None
    dispatch: float | None = None
    batch: int | None = None

    @property
    def end(self) -> float:
        """Its last milestone: the hand-off if dispatched, else when it was
        materialised; its last request's end if it never completed (dropped)."""
        marks = [t for t in (self.complete, self.materialized, self.dispatch) if t is not None]
        return max(marks) if marks else self.last_finish


@dataclass
class TrainSpan:
    """Active trainer compute for one batch (a batch may have several spans)."""

    batch: int
    start: float
    end: float
    fields: dict[str, Any]


def end_time(events: Sequence[dict[str, Any]]) -> float:
    return max((e["t"] for e in events), default=0.0)


def attempts(events: Sequence[dict[str, Any]]) -> list[Attempt]:
    """Every request attempt in submit order. Attempts still open when the trace
    ends (an interrupted run) end at the trace's last event, status `unfinished`."""
    out: list[Attempt] = []
    open_: dict[tuple[int, int], Attempt] = {}
    engine_of: dict[tuple[int, int], int] = {}
    for e in events:
        ev = e["ev"]
        if ev not in ("request_submit", "request_admit", "request_preempt", "request_finish"):
            continue
        key, t = (e["group"], e["sample"]), e["t"]
        a = open_.get(key)
        if ev == "request_submit":
            if a is not None:  # resubmitted without a finish: close the old one here
                a._close(t)
                a.end = t
            engine = e.get("engine", engine_of.get(key, 0))
            engine_of[key] = engine
            a = Attempt(e["group"], e["sample"], e["round"], engine, t, e["prompt_tokens"],
                        e.get("resumed_tokens", 0), _since=t)
            open_[key] = a
            out.append(a)
        elif a is None:
            continue  # admit/preempt/finish of a request submitted before the trace began
        elif ev == "request_admit":
            if a._state == "waiting":
                a._close(t)
                a._state = "running"
        elif ev == "request_preempt":
            if a._state == "running":
                a._close(t)
                a._state = "waiting"
                a.preempts += 1
        else:
            a._close(t)
            a.end, a.status, a.response_tokens = t, e["status"], e["response_tokens"]
            del open_[key]
    last = end_time(events)
    for a in open_.values():
        a._close(last)
        a.end = last
    return out


def groups(events: Sequence[dict[str, Any]], tries: Sequence[Attempt]) -> list[Group]:
    """Every group that had a request, ordered by first submit."""
    by_id: dict[int, Group] = {}
    for a in tries:
        g = by_id.get(a.group)
        if g is None:
            by_id[a.group] = Group(a.group, a.round, a.submit, a.end)
        else:
            g.first_submit = min(g.first_submit, a.submit)
            g.last_finish = max(g.last_finish, a.end)
    for e in events:
        g = by_id.get(e.get("group")) if e["ev"] in ("group_complete",
                                                      "group_materialized") else None
        if e["ev"] == "group_complete" and g is not None:
            g.complete = e["t"]
        elif e["ev"] == "group_materialized" and g is not None:
            g.materialized = e["t"]
        elif e["ev"] == "batch_dispatch":
            for gid in e["groups"]:
                if gid in by_id and by_id[gid].dispatch is None:
                    by_id[gid].dispatch, by_id[gid].batch = e["t"], e["batch"]
    return sorted(by_id.values(), key=lambda g: (g.first_submit, g.group))


def train_spans(events: Sequence[dict[str, Any]]) -> list[TrainSpan]:
    """train_start→train_end spans; the trainer's spans never overlap, so an end
    closes the span open at that moment (as `harness.core.metrics` reads them)."""
    out: list[TrainSpan] = []
    start: dict[str, Any] | None = None
    for e in events:
        if e["ev"] == "train_start":
            start = e
        elif e["ev"] == "train_end" and start is not None:
            fields = {k: v for k, v in {**start, **e}.items() if k not in ("t", "ev")}
            out.append(TrainSpan(e["batch"], start["t"], e["t"], fields))
            start = None
    return out


def overlap(a: float, b: float, t0: float, t1: float) -> float:
    """Seconds of [a, b] inside the window [t0, t1]."""
    return max(0.0, min(b, t1) - max(a, t0))


def busy(spans: Sequence[TrainSpan], t0: float, t1: float) -> float:
    """Seconds of the window [t0, t1] the trainer spent in `spans` (one trainer: its
    spans never overlap)."""
    return sum(overlap(s.start, s.end, t0, t1) for s in spans)


def round_of(events: Sequence[dict[str, Any]]) -> dict[int, tuple[float, float]]:
    """round -> (its rollout_start, the next round's rollout_start or +inf): the window
    that owns the batches dispatched in it, as in `harness.core.metrics`."""
    starts = sorted((e["t"], e["round"]) for e in events if e["ev"] == "rollout_start")
    return {r: (t, starts[i + 1][0] if i + 1 < len(starts) else float("inf"))
            for i, (t, r) in enumerate(starts)}


def lanes(intervals: Sequence[Interval]) -> list[int]:
    """The lowest free lane for each interval, taken in start order, so no two
    intervals on one lane overlap (touching ends are allowed)."""
    order = sorted(range(len(intervals)), key=lambda i: (intervals[i][0], intervals[i][1], i))
    busy: list[tuple[float, int]] = []  # (end, lane) of lanes in use
    free: list[int] = []
    out = [0] * len(intervals)
    count = 0
    for i in order:
        start, end = intervals[i]
        while busy and busy[0][0] <= start:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane, count = count, count + 1
        out[i] = lane
        heapq.heappush(busy, (max(start, end), lane))
    return out

