"""A trace as Chrome/Perfetto trace-event JSON, for https://ui.perfetto.dev.

Why: the metrics say *how much* the trainer waited; the timeline shows *where*:
which groups straggled, when the first batch left the FIFO, how full the engine
was meanwhile. The output is the "traceEvents" array format (`ts`/`dur` in
integer microseconds, which loses nothing: the trace's `t` has six decimals).

Processes (tracks):
  control node  rounds (rollout_start→rollout_complete), groups (first submit →
                hand-off, nested: generate → materialise → ready in the FIFO),
                batch dispatches, system decisions and placement changes (instants)
  trainer       train batches (train_start→train_end), optimizer steps and weight
                publications (instants)
  engine N      one row per request slot: each request attempt (submit→finish)
                on the lowest free row, nested `queued` and `running` slices
                (admit→preempt/finish); counters of running and waiting
                sequences and of estimated KV-cache tokens

KV-cache use is not in the trace (schema 2), so it is estimated: a running
sequence holds its prompt plus the tokens generated so far, and an attempt's
tokens (response_tokens − resumed_tokens) are spread evenly over its running
time; a preempted sequence frees its cache and recomputes it on readmission.
For simulated runs `otherData` gives the replica's KV capacity as a scale.
Running/waiting counts are exact: they follow submit/admit/preempt/finish.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from harness.analysis.spans import Attempt, attempts, end_time, groups, lanes, train_spans

CONTROL_PID, TRAINER_PID, ENGINE_PID0 = 1, 2, 10
TRAIN_TID, STEP_TID, WEIGHTS_TID = 1, 2, 3
KV_SAMPLES = 1000  # extra, evenly spaced samples of the (piecewise linear) KV estimate


def us(t: float) -> int:
    """Seconds to integer microseconds (the trace's resolution)."""
    return round(t * 1_000_000)


def _slice(name: str, cat: str, pid: int, tid: int, start: float, end: float,
           args: dict[str, Any] | None = None) -> dict[str, Any]:
    ts = us(start)
    return {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid, "ts": ts,
            "dur": max(0, us(end) - ts), "args": args or {}}


def _instant(name: str, cat: str, pid: int, tid: int, t: float,
             args: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "cat": cat, "ph": "i", "s": "t", "pid": pid, "tid": tid,
            "ts": us(t), "args": args or {}}


def _meta(kind: str, pid: int, tid: int | None, **args: Any) -> dict[str, Any]:
    ev: dict[str, Any] = {"name": kind, "ph": "M", "pid": pid, "ts": 0, "args": args}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _thread(pid: int, tid: int, name: str) -> list[dict[str, Any]]:
    return [_meta("thread_name", pid, tid, name=name),
            _meta("thread_sort_index", pid, tid, sort_index=tid)]


def _process(pid: int, name: str) -> list[dict[str, Any]]:
    return [_meta("process_name", pid, None, name=name),
            _meta("process_sort_index", pid, None, sort_index=pid)]


def _args(e: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in e.items() if k not in ("t", "ev")}


# -- engine ----------------------------------------------------------------

def _request_events(pid: int, tries: Sequence[Attempt]) -> tuple[list[dict[str, Any]], int]:
    """Request slices on the lowest free slot row; returns the events and the rows."""
    rows = lanes([(a.submit, a.end) for a in tries])
    out: list[dict[str, Any]] = []
    for a, row in zip(tries, rows, strict=True):
        tid = row + 1
        args = {"round": a.round, "group": a.group, "sample": a.sample, "status": a.status,
                "prompt_tokens": a.prompt_tokens, "resumed_tokens": a.resumed_tokens,
                "response_tokens": a.response_tokens, "preempts": a.preempts,
                "submit_s": a.submit, "admit_s": a.first_admit, "end_s": a.end}
        out.append(_slice(f"g{a.group}/s{a.sample}", "request", pid, tid, a.submit, a.end,
                          args))
        parts = [(s, e, "queued") for s, e in a.waiting] + [(s, e, "running")
                                                            for s, e in a.running]
        for start, end, name in sorted(parts):
            if us(end) > us(start):  # an instant admission leaves no queued slice
                out.append(_slice(name, "request", pid, tid, start, end,
                                  {"group": a.group, "sample": a.sample}))
    return out, max(rows, default=-1) + 1


def _steps(deltas: Iterable[tuple[float, int, int]]) -> list[tuple[float, int, int]]:
    """Running sums of (t, d_running, d_waiting), one sample per distinct time."""
    out: list[tuple[float, int, int]] = []
    running = waiting = 0
    for t, dr, dw in sorted(deltas):
        running, waiting = running + dr, waiting + dw
        if out and out[-1][0] == t:
            out[-1] = (t, running, waiting)
        else:
            out.append((t, running, waiting))
    return out


def sequence_counts(tries: Sequence[Attempt]) -> list[tuple[float, int, int]]:
    """(t, running, waiting) after every change: exact, from the request events."""
    deltas: list[tuple[float, int, int]] = []
    for a in tries:
        for start, end in a.running:
            deltas += [(start, 1, 0), (end, -1, 0)]
        for start, end in a.waiting:
            deltas += [(start, 0, 1), (end, 0, -1)]
    return _steps(deltas)


def kv_estimate(tries: Sequence[Attempt], t_end: float) -> list[tuple[float, int]]:
    """(t, estimated KV tokens) at every admit/preempt/finish and on an even grid.

    Each running interval contributes prompt + resumed + rate × (running time so
    far), a linear piece; the sum is kept as intercept + slope × t."""
    changes: list[tuple[float, int, float, float]] = []  # t, d_active, d_intercept, d_slope
    for a in tries:
        total = sum(end - start for start, end in a.running)
        made = (a.response_tokens or a.resumed_tokens) - a.resumed_tokens
        rate = made / total if total > 0 else 0.0
        base, done = float(a.prompt_tokens + a.resumed_tokens), 0.0
        for start, end in a.running:
            intercept = base + rate * (done - start)
            changes += [(start, 1, intercept, rate), (end, -1, -intercept, -rate)]
            done += end - start
    if not changes:
        return []
    t0 = min(c[0] for c in changes)
    grid = [t0 + (t_end - t0) * i / KV_SAMPLES for i in range(KV_SAMPLES + 1)]
    changes += [(t, 0, 0.0, 0.0) for t in grid]
    changes.sort(key=lambda c: (c[0], -c[1]))
    out: list[tuple[float, int]] = []
    active, intercept, slope = 0, 0.0, 0.0
    for i, (t, d_active, d_int, d_slope) in enumerate(changes):
        active, intercept, slope = active + d_active, intercept + d_int, slope + d_slope
        if i + 1 < len(changes) and changes[i + 1][0] == t:
            continue  # one sample per time, after all its changes
        if active == 0:  # nothing resident: exactly empty (drops rounding drift)
            intercept = slope = 0.0
        value = max(0, round(intercept + slope * t))
        if not out or out[-1][1] != value:
            out.append((t, value))
    return out


def _engine_events(engine: int, tries: Sequence[Attempt], t_end: float,
                   ) -> list[dict[str, Any]]:
    pid = ENGINE_PID0 + engine
    out = _process(pid, f"engine {engine}")
    requests, rows = _request_events(pid, tries)
    for row in range(rows):
        out += _thread(pid, row + 1, f"slot {row}")
    out += requests
    for t, running, waiting in sequence_counts(tries):
        out.append({"name": "sequences", "ph": "C", "pid": pid, "ts": us(t),
                    "args": {"running": running, "waiting": waiting}})
    for t, tokens in kv_estimate(tries, t_end):
        out.append({"name": "KV cache tokens (estimated)", "ph": "C", "pid": pid,
                    "ts": us(t), "args": {"tokens": tokens}})
    return out


# -- control node and trainer ----------------------------------------------

def _control_events(events: Sequence[dict[str, Any]], tries: Sequence[Attempt],
                    t_end: float) -> list[dict[str, Any]]:
    pid = CONTROL_PID
    rounds: list[tuple[int, float, float, bool]] = []
    started: dict[int, float] = {}
    instants: list[tuple[str, str, float, dict[str, Any]]] = []  # thread, name, t, args
    for e in events:
        ev = e["ev"]
        if ev == "rollout_start":
            started[e["round"]] = e["t"]
        elif ev == "rollout_complete" and e["round"] in started:
            rounds.append((e["round"], started.pop(e["round"]), e["t"], True))
        elif ev == "batch_dispatch":
            instants.append(("dispatch", f"dispatch batch {e['batch']}", e["t"], _args(e)))
        elif ev == "decision":
            instants.append(("decision", str(e["what"]), e["t"], _args(e)))
        elif ev in ("placement_switch", "engine_resize", "engine_reconfigure"):
            what = {"placement_switch": f"GPUs to {e.get('to')}",
                    "engine_resize": f"resize to {e.get('replicas')} replicas",
                    "engine_reconfigure": f"reconfigure tp={e.get('tp')}"}[ev]
            instants.append(("placement", what, e["t"], _args(e)))
    rounds += [(r, t, t_end, False) for r, t in started.items()]
    rounds.sort(key=lambda r: (r[1], r[0]))
    round_rows = lanes([(start, end) for _, start, end, _ in rounds])
    n_round_rows = max(round_rows, default=0) + 1
    # thread ids in display order: rounds, then the instants, then the group rows
    tids = {"dispatch": n_round_rows + 1, "decision": n_round_rows + 2,
            "placement": n_round_rows + 3}
    group_tid0 = n_round_rows + 4

    out = _process(pid, "control node")
    for row in range(n_round_rows):
        out += _thread(pid, 1 + row, "rounds" if row == 0 else f"rounds {row}")
    out += _thread(pid, tids["dispatch"], "batch dispatch")
    out += _thread(pid, tids["decision"], "decisions")
    out += _thread(pid, tids["placement"], "placement")
    for (rnd, start, end, done), row in zip(rounds, round_rows, strict=True):
        name = f"round {rnd} rollout" + ("" if done else " (unfinished)")
        out.append(_slice(name, "round", pid, 1 + row, start, end, {"round": rnd}))
    for thread, name, t, args in instants:
        out.append(_instant(name, thread, pid, tids[thread], t, args))

    gs = groups(events, tries)
    rows = lanes([(g.first_submit, g.end) for g in gs])
    for row in range(max(rows, default=-1) + 1):
        out += _thread(pid, group_tid0 + row, f"groups {row}")
    for g, row in zip(gs, rows, strict=True):
        tid = group_tid0 + row
        state = ("" if g.dispatch is not None else
                 " (not dispatched)" if g.materialized is not None else " (dropped)")
        args = {"group": g.group, "round": g.round, "first_submit_s": g.first_submit,
                "complete_s": g.complete, "materialized_s": g.materialized,
                "dispatch_s": g.dispatch, "batch": g.batch}
        out.append(_slice(f"group {g.group}{state}", "group", pid, tid, g.first_submit,
                          g.end, args))
        marks = [g.first_submit, g.complete, g.materialized, g.dispatch]
        for name, i in (("generate", 0), ("materialize", 1), ("ready in FIFO", 2)):
            if marks[i] is not None and marks[i + 1] is not None and marks[i] <= marks[i + 1]:
                out.append(_slice(name, "group", pid, tid, marks[i], marks[i + 1],
                                  {"group": g.group}))
    return out


def _trainer_events(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    pid = TRAINER_PID
    out = _process(pid, "trainer")
    out += _thread(pid, TRAIN_TID, "train batches")
    out += _thread(pid, STEP_TID, "optimizer steps")
    out += _thread(pid, WEIGHTS_TID, "weight publications")
    dispatched = {e["batch"]: e for e in events if e["ev"] == "batch_dispatch"}
    for span in train_spans(events):
        args = dict(span.fields)
        if span.batch in dispatched:
            args["groups"] = dispatched[span.batch]["groups"]
            args["dispatch_s"] = dispatched[span.batch]["t"]
        out.append(_slice(f"batch {span.batch}", "train", pid, TRAIN_TID, span.start,
                          span.end, args))
    for e in events:
        if e["ev"] == "optimizer_step":
            out.append(_instant(f"step {e['step']} → v{e['version']}", "optimizer", pid,
                                STEP_TID, e["t"], _args(e)))
        elif e["ev"] == "weights_published":
            out.append(_instant(f"publish v{e['version']}", "weights", pid, WEIGHTS_TID,
                                e["t"], _args(e)))
    return out


def timeline(events: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The trace-event JSON object for one trace."""
    head = events[0]
    t_end = end_time(events)
    tries = attempts(events)
    by_engine: dict[int, list[Attempt]] = defaultdict(list)
    for a in tries:
        by_engine[a.engine].append(a)
    out = _control_events(events, tries, t_end) + _trainer_events(events)
    for engine in sorted(by_engine):
        out += _engine_events(engine, by_engine[engine], t_end)
    other = {"system": head["system"], "workload": head["workload"],
             "runtime": head["runtime"], "seed": head["seed"],
             "kv_cache": "estimated from request events (see harness.analysis.timeline)"}
    capacity = sim_kv_capacity(head)
    if capacity is not None:
        other["kv_capacity_tokens_per_replica"] = capacity
    return {"traceEvents": out, "displayTimeUnit": "ms", "otherData": other}


def sim_kv_capacity(head: dict[str, Any]) -> int | None:
    """A simulated run's KV-cache capacity per replica (at its starting tensor-parallel
    size), a scale for the estimate; None for other runtimes or unknown presets."""
    if head.get("runtime") != "sim":
        return None
    try:
        from harness.core.config_io import from_header
        from harness.sim.runtime import kv_capacity_tokens

        return kv_capacity_tokens(from_header(head["config"]))
    except Exception:  # noqa: BLE001  (an older or foreign config: no scale, no error)
        return None
