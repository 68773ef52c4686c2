"""Per-round metrics of traces that may stop short, and per-step metrics.

The round figures themselves are harness/core/rounds.py's (`round_metrics`, named here
too, as are its keys). A trace that stops short (an interrupted run: no `run_end`, or
one naming an error) is read as far as it goes (`metrics_for_traces`): rounds it shows
finished (`finished_rounds`) get exactly the figures the whole trace would give; the
others are flagged `incomplete`, with NaN figures.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from harness.core.rounds import (  # noqa: F401  (named here for their readers)
    KEYS,
    OFFPOLICY_KEYS,
    ROUND_METRIC_EVENTS,
    TIME_KEYS,
    TOKEN_KEYS,
    RoundMetrics,
    owning_rounds,
    round_metrics,
    untimed,
)


def finished_rounds(events: Sequence[dict[str, Any]]) -> set[int]:
    """The rounds of a trace that stops short (no `run_end`, or one with an error)
    whose figures are final: the round's rollout completed, every request it
    submitted finished, every batch dispatched in it (`owning_rounds`) finished
    training, and the run went on past it: a later round started or, for the last
    round, weights were published after all that. The last round of an interrupted
    pipelined run may be left out though it finished: the trace cannot tell. A streaming
    trace counts a request's tokens to rounds by time from its submission on
    (harness.core.streaming), so one still generating touches no round before its own,
    even on a replica that pulls weights late (laminar's relay)."""
    order: list[int] = []  # rounds in the order they started
    completed: dict[int, int] = {}  # round -> index of its rollout_complete
    batches: dict[int, list[int]] = defaultdict(list)  # round -> batches dispatched in it
    ended: dict[int, int] = {}  # batch -> index of its last train_end
    training: set[int] = set()  # batches with a span open where the trace stops
    published = -1  # index of the last weights_published
    pending: dict[tuple[int, int], int] = {}  # request -> round, until it finishes
    finishes: dict[int, int] = {}  # round -> index of its last request_finish
    # a request aborted in the trace's last instant may be sent again in that instant (a
    # sync's partial rollout, a move to another replica): its round is not final yet,
    # unless its group was dropped first (prime-rl's cancellations at the run's end)
    end, cut, dropped = (events[-1].get("t") if events else None), set(), set()
    for i, (e, owner) in enumerate(zip(events, owning_rounds(events), strict=True)):
        ev = e["ev"]
        if ev == "request_submit":
            pending[(e["group"], e["sample"])] = e["round"]
        elif ev == "request_finish":
            rnd = pending.pop((e["group"], e["sample"]), None)
            if rnd is not None:
                finishes[rnd] = i
                if e["status"] == "aborted" and e["t"] == end and e["group"] not in dropped:
                    cut.add(rnd)
        elif ev == "decision" and e.get("what") in ("drop_group", "discard_groups"):
            dropped.update(e["groups"] if "groups" in e else [e.get("group")])
        elif ev == "rollout_start":
            order.append(e["round"])
        elif ev == "rollout_complete":
            completed[e["round"]] = i
        elif ev == "batch_dispatch":
            if owner is not None:
                batches[owner].append(e["batch"])
        elif ev == "train_start":
            training.add(e["batch"])
        elif ev == "train_end":
            training.discard(e["batch"])
            ended[e["batch"]] = i
        elif ev == "weights_published":
            published = i
    unfinished = set(pending.values()) | cut
    # a request still generating may have made tokens in any round from its own on (a
    # streaming run's requests cross rounds): those rounds' token figures are not final
    first = min((order.index(r) for r in unfinished if r in order), default=len(order))
    finished = set()
    for n, rnd in enumerate(order):
        if n >= first or rnd not in completed or rnd in unfinished or any(
                b not in ended or b in training for b in batches[rnd]):
            continue
        last = max([completed[rnd], finishes.get(rnd, -1), *(ended[b] for b in batches[rnd])])
        if n + 1 < len(order) or published > last:
            finished.add(rnd)
    return finished


def prefix_metrics(trace: Any) -> list[dict[str, Any]]:
    """`round_metrics` of a `harness.core.trace.Trace`, each row with `incomplete`: true
    for a round that did not finish (the trace stops short in it or before its
    training ended); such a round's figures are NaN."""
    rows = round_metrics(trace.events)
    finished = None if trace.complete else finished_rounds(trace.events)
    for row in rows:
        if finished is not None:  # a streaming run's phases need the whole run
            row.pop("phase", None)
        row["incomplete"] = finished is not None and row["round"] not in finished
        if row["incomplete"]:
            row.update(dict.fromkeys((*KEYS, *OFFPOLICY_KEYS), math.nan))
    return rows


def read_as_far_as_it_goes(path: str, partial: bool) -> Any:
    """The trace at `path` as far as it goes (a `harness.core.trace.Trace`)."""
    from harness.core.trace import CutLine, read_prefix

    try:
        return read_prefix(path, allow_cut=partial)
    except CutLine as err:
        raise CutLine(f"{err}; --partial reads the lines before it") from None


def metrics_for_traces(paths: Iterable[str], partial: bool = False,
                       warn: Callable[[str], None] | None = None,
                       seen: Callable[[str, Any], None] | None = None
                       ) -> list[dict[str, Any]]:
    """Per-round rows of every trace (`prefix_metrics`). A trace that stops short
    (an interrupted run) is read as far as it goes, and `warn` gets one line about
    it; with `partial` its last line may also be cut mid-write. `seen(path, trace)`
    gets each trace as read, for what else a caller takes from it (without reading
    it again)."""
    rows: list[dict[str, Any]] = []
    for path in paths:
        trace = read_as_far_as_it_goes(path, partial)
        if seen is not None:
            seen(path, trace)
        trace_rows = prefix_metrics(trace)
        if untimed(trace.events[0]) and warn is not None:
            fmt = trace.events[0]["import"].get("format", "another system's logs")
            warn(f"{path}: imported from {fmt} logs without times: it has no timings (the "
                 f"time figures are left out); replay its work with --workload trace:{path}")
        if not trace.complete and warn is not None:
            left = [str(r["round"]) for r in trace_rows if r["incomplete"]]
            what = (f"round(s) {', '.join(left)} did not finish: figures left out" if left
                    else "every round it started finished" if trace_rows
                    else "no round started")
            warn(f"{path}: incomplete trace ({trace.problem()}); {what}")
        rows.extend(trace_rows)
    return rows


def steps_for_traces(paths: Iterable[str], partial: bool = False,
                     warn: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """`step_metrics` of every trace, read as `metrics_for_traces` reads them (each
    optimizer step of a trace that stops short is whole)."""
    rows: list[dict[str, Any]] = []
    for path in paths:
        trace = read_as_far_as_it_goes(path, partial)
        if not trace.complete and warn is not None:
            warn(f"{path}: incomplete trace ({trace.problem()}); steps up to where it stops")
        rows.extend(step_metrics(trace.events))
    return rows


STEP_KEYS = ("step", "version", "tokens", "lag_min", "lag_mean", "lag_max", "ess",
             "ess_clamped")


def step_metrics(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per optimizer step: its lag and ESS figures as the trace carries them
    (modelled on the simulator, measured on live runs)."""
    head = events[0]
    rows = []
    for e in events:
        if e["ev"] == "optimizer_step":
            row = {"system": head["system"], "workload": head["workload"], "t": e["t"]}
            row.update({k: e.get(k, math.nan) for k in STEP_KEYS})
            rows.append(row)
    return rows
