"""One run's figures for the staleness study, read from its trace alone.

Every figure is taken over one window of the run, between the end of its
`warmup` first optimizer steps and the end of the step `drain` steps before its
last: t0 = time of step `warmup` (0 with none), t1 = time of step n - `drain`. The
study takes the window every ranking in the tool takes (`steady_figures`:
harness.core.yardstick's rule, its warm-up the pipeline's first fill and its drain
the steps after the last new group, no cut where the pipeline is empty), so that
the study and `plan` measure a system alike; `run_figures` takes any window.

- `trained_tokens_per_s`: the response tokens of the window's optimizer steps (each step's
  `tokens`) over t1 - t0;
- `lag_mean`: their tokens' mean lag in steps (each step's `lag_mean` weighted by
  its tokens); `lag_max`: the most any of them lags; `lag_max_run`: the same over
  every step of the run, warm-up and drain included;
- `ess`: the steps' ESS weighted by their tokens (modelled on the simulator,
  harness.core.offpolicy); `ess_min`: the window's worst step;
- `trainer_idle`: the share of the window with no training span open;
- `rollout_idle`: the share of the window an engine replica has no request of its
  own in flight (submitted and not finished), averaged over the replicas: the long
  tail's idle engines, the pauses for weight updates, a synchronous system's
  engines while it trains;
- `in_flight`: the mean requests in flight (submitted, not finished) per replica over
  the window: the batch the engines decode, which sets their throughput;
- `backlog`: the mean, over the window's time, of samples generated but not yet
  trained: finished responses of groups that have not left the pipeline (trained,
  dropped or stopped), by the rule `rolloutbench check` holds traces to
  (harness.analysis.check.backlog, read through the same TraceView);
- `dropped_groups`: groups dropped over the whole run (`drop_group`, `discard_groups`);
- `wasted_share`: of the response tokens generated over the whole run, the share thrown
  away: an attempt's tokens a later attempt of the same sample does not resume (an
  abort restarted from scratch: tail batching, a cancelled request), an attempt aborted
  and never resumed (but those the run's end leaves in flight), and every response
  of a dropped group (`_wasted`);
- `sync_share`: the share of the window the engines spend installing weights: the
  window's `weights_published` times the run's `weight_sync_s` (the header's
  `sim_params`; NaN for a trace without it). A colocated run's switches between
  phases are not in it (its idle shares hold them).
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from harness.analysis import spans
from harness.core.yardstick import token_weighted

if TYPE_CHECKING:
    from harness.analysis.check.model import TraceView

FIGURES = ("trained_tokens_per_s", "generated_tokens_per_s", "warmup_steps", "drain_steps",
           "lag_mean", "lag_max", "lag_max_run", "ess", "ess_min",
           "trainer_idle", "rollout_idle", "in_flight", "backlog", "dropped_groups",
           "wasted_share", "sync_share", "steps", "window_s")


class TraceProblem(ValueError):
    """A trace the study cannot read a window from; the message says why."""


def read_events(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """A whole trace's events, decoded at once (msgspec: a tenth of the time of
    harness.core.trace.read_trace, whose per-line schema checks a simulator's own
    trace does not need; plain or zstd). A trace that did not end normally is
    refused."""
    import msgspec

    from harness.core.trace_io import read_bytes

    try:
        data = read_bytes(path).strip()
    except OSError as err:
        raise TraceProblem(f"{path}: {err.strerror}") from None
    try:
        events = msgspec.json.decode(b"[" + data.replace(b"\n", b",") + b"]")
    except msgspec.DecodeError as err:
        raise TraceProblem(f"{path}: not a trace ({err})") from None
    if not events or not isinstance(events[0], dict) or events[0].get("ev") != "run_start":
        raise TraceProblem(f"{path}: not a trace (no run_start header)")
    last = events[-1]
    if last.get("ev") != "run_end" or "error" in last:
        raise TraceProblem(f"{path}: the run did not end normally")
    return events


def _engines(events: Sequence[dict[str, Any]], t0: float, t1: float,
             replicas: int) -> tuple[float, float, int]:
    """Summed time each engine replica had a request in flight within [t0, t1]; the
    requests in flight, integrated over [t0, t1] (all replicas); the replicas (the
    config's, or more if the trace names more)."""
    where: dict[tuple[int, int], int] = {}  # request -> its engine
    count: dict[int, int] = defaultdict(int)
    since: dict[int, float] = {}
    busy = area = 0.0
    level, prev = 0, events[0]["t"]
    for e in events:
        ev = e["ev"]
        if ev == "request_submit":
            k = int(e.get("engine", 0))
            where[(e["group"], e["sample"])] = k
            if count[k] == 0:
                since[k] = e["t"]
            count[k] += 1
        elif ev == "request_finish" and (e["group"], e["sample"]) in where:
            k = where.pop((e["group"], e["sample"]))
            count[k] -= 1
            if count[k] == 0:
                busy += spans.overlap(since[k], e["t"], t0, t1)
        else:
            continue
        area += level * spans.overlap(prev, e["t"], t0, t1)
        level += 1 if ev == "request_submit" else -1
        prev = e["t"]
    busy += sum(spans.overlap(since[k], t1, t0, t1) for k, n in count.items() if n > 0)
    area += level * spans.overlap(prev, t1, t0, t1)
    return busy, area, max(replicas, max(count, default=-1) + 1)


def _view(events: Sequence[dict[str, Any]]) -> TraceView:
    """The trace's groups as `rolloutbench check` reads them (built once a run: the
    backlog and the waste both need them)."""
    from harness.analysis.check.model import TraceView

    return TraceView.of(events)


def _backlog(events: Sequence[dict[str, Any]], t0: float, t1: float,
             view: TraceView | None = None) -> tuple[float, int]:
    """Samples generated and untrained, integrated over [t0, t1]; groups dropped."""
    view = view or _view(events)
    leaves: dict[int, list[int]] = defaultdict(list)  # event index -> groups leaving
    for g in view.groups.values():
        if g.resolved is not None:
            leaves[g.resolved].append(g.gid)
    counted: dict[int, int] = defaultdict(int)
    gone: set[int] = set()
    level, area, prev = 0, 0.0, events[0]["t"]
    for i, e in enumerate(events):
        area += level * spans.overlap(prev, e["t"], t0, t1)
        prev = e["t"]
        if e["ev"] == "request_finish" and e["status"] == "finished":
            gid = e["group"]
            if gid in view.groups and gid not in gone:
                counted[gid] += 1
                level += 1
        for gid in leaves.get(i, ()):
            level -= counted.pop(gid, 0)
            gone.add(gid)
    return area, sum(1 for g in view.groups.values() if g.dropped is not None)


def _wasted(events: Sequence[dict[str, Any]],
            view: TraceView | None = None) -> tuple[int, int]:
    """Response tokens thrown away and generated over the run. An attempt generates its
    `response_tokens` less the `resumed_tokens` it started from; a sample's next attempt
    keeps `resumed_tokens` of the one before and throws the rest away; an attempt no
    later one follows is thrown away if its group was dropped, or if it was aborted
    before the run's last round began (one aborted after is work the run's end leaves in
    flight, as a finite run must: APRIL's partial rollouts of its last round)."""
    view = view or _view(events)
    dropped = {g.gid for g in view.groups.values() if g.dropped is not None}
    stop = max((e["t"] for e in events if e["ev"] == "rollout_start"),
               default=max((e["t"] for e in events if e["ev"] == "optimizer_step"),
                           default=math.inf))
    start: dict[tuple[int, int], int] = {}  # sample -> resumed tokens of its attempt
    last: dict[tuple[int, int], tuple[int, bool]] = {}  # sample -> its last attempt's
    wasted = generated = 0  # tokens, and whether it was aborted before `stop`
    for e in events:
        if e["ev"] == "request_submit":
            key = (e["group"], e["sample"])
            resumed = int(e.get("resumed_tokens", 0) or 0)
            if key in last:
                wasted += max(0, last.pop(key)[0] - resumed)
            start[key] = resumed
        elif e["ev"] == "request_finish":
            key = (e["group"], e["sample"])
            tokens = int(e["response_tokens"])
            generated += max(0, tokens - start.get(key, 0))
            last[key] = (tokens, e["status"] != "finished" and e["t"] < stop)
    wasted += sum(tokens for (gid, _), (tokens, cut) in last.items() if cut or gid in dropped)
    return wasted, generated


def _sync_s(events: Sequence[dict[str, Any]], t0: float, t1: float) -> float:
    """Seconds of weight installs in (t0, t1]: their count times the run's
    `weight_sync_s`; NaN when the header does not say it (a live trace)."""
    sync = (events[0].get("sim_params") or {}).get("weight_sync_s")
    if sync is None:
        return float("nan")
    return sync * sum(1 for e in events
                      if e["ev"] == "weights_published" and t0 < e["t"] <= t1)


def run_figures(events: Sequence[dict[str, Any]], warmup: int, drain: int) -> dict[str, float]:
    """The study's figures of one run (see the module's docstring)."""
    steps = [e for e in events if e["ev"] == "optimizer_step"]
    n = len(steps)
    if warmup < 0 or drain < 0 or n <= warmup + drain:
        raise TraceProblem(f"{n} optimizer steps: a window after {warmup} warm-up and before "
                           f"{drain} drain steps needs more")
    t0 = steps[warmup - 1]["t"] if warmup else events[0]["t"]
    t1 = steps[n - drain - 1]["t"]
    if t1 <= t0:
        raise TraceProblem(f"the window's steps take no time ({t0} to {t1} s)")
    span = t1 - t0
    window = steps[warmup:n - drain]
    config = events[0].get("config") or {}
    busy, in_flight, replicas = _engines(
        events, t0, t1, int((config.get("sim") or {}).get("rollout_engines", 1)))
    view = _view(events)
    area, dropped = _backlog(events, t0, t1, view)
    wasted, generated = _wasted(events, view)
    lag_max = [s["lag_max"] for s in window if s.get("lag_max") is not None]
    lag_run = [s["lag_max"] for s in steps if s.get("lag_max") is not None]
    ess = [s["ess"] for s in window if s.get("ess") is not None]
    return {
        "trained_tokens_per_s": sum(s.get("tokens", 0) for s in window) / span,
        "lag_mean": token_weighted(window, "lag_mean"),
        "lag_max": max(lag_max) if lag_max else float("nan"),
        "lag_max_run": max(lag_run) if lag_run else float("nan"),
        "ess": token_weighted(window, "ess"),
        "ess_min": min(ess) if ess else float("nan"),
        "trainer_idle": max(0.0, 1.0 - spans.busy(spans.train_spans(events), t0, t1) / span),
        "rollout_idle": max(0.0, 1.0 - busy / (replicas * span)),  # not -1e-16 from sums
        "in_flight": in_flight / (replicas * span),
        "backlog": area / span,
        "dropped_groups": dropped,
        "wasted_share": wasted / generated if generated else float("nan"),
        "sync_share": _sync_s(events, t0, t1) / span,
        "steps": n,
        "window_s": span,
    }


def steady_figures(events: Sequence[dict[str, Any]]) -> dict[str, float]:
    """`run_figures` over the yardstick's steady window (harness.core.yardstick), with
    its warm-up and drain steps and the tokens generated in it; a run without a window
    has NaN figures (but its steps and drops), which no answer or front takes."""
    from harness.core.yardstick import delivered

    fig = delivered(events)
    if fig["no_window"]:
        out = dict.fromkeys(FIGURES, float("nan"))
        view = _view(events)
        wasted, generated = _wasted(events, view)
        out.update(steps=sum(1 for e in events if e["ev"] == "optimizer_step"),
                   dropped_groups=_backlog(events, 0.0, 0.0, view)[1],
                   wasted_share=wasted / generated if generated else float("nan"))
        return out
    warmup, drain = int(fig["warmup_steps"]), int(fig["drain_steps"])
    return {**run_figures(events, warmup, drain), "warmup_steps": warmup,
            "drain_steps": drain, "generated_tokens_per_s": fig["generated_tokens_per_s"]}
