"""What is read off a verl-async run's trace (`summary`): its mean step, gen, training and
wait seconds over its windows, per the readings in harness/studies/reproduce/verl_async/
runs.py's docstring (the windows, what verl's timers hold), and a colocated run's
replicas' generation times (`replica_times`).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from typing import Any

import numpy as np

from harness.analysis.spans import TrainSpan, busy, train_spans
from harness.core.config import RunConfig
from harness.run.execute import reads
from harness.sim.replica_windows import KIND as WINDOWS


def replica_times(events: list[dict[str, Any]], windows: list[tuple[float, float]]
                  ) -> tuple[float, float]:
    """(the replicas' mean generation, the longest's lead over that mean), seconds, over the
    windows: each replica's generation runs from the window's first admission to its last
    finish. verl's `generate_sequences` is that mean (`reduce_timing` averages over ranks,
    verl@503ea75:verl/workers/fsdp_workers.py:748-750); its gen waits for the longest.
    Read from the simulator's `replica_window` records where the run has them, else from
    its requests' admissions and finishes: the same figures (tests/test_replica_windows.py)."""
    records = {e["since"]: e for e in events if e["ev"] == WINDOWS}
    spans = _from_records(records, windows) if records else _from_events(events, windows)
    means = [float(np.mean(lasts)) - start for start, lasts in spans]
    leads = [max(lasts) - start - mean for (start, lasts), mean in zip(spans, means, strict=True)]
    return (float(np.mean(means)), float(np.mean(leads))) if means else (math.nan, math.nan)


Spans = list[tuple[float, list[float]]]  # per window with a finish: first admission, the
# replicas' last finishes by replica (so that both readings sum them in the same order)


def _from_events(events: list[dict[str, Any]], windows: list[tuple[float, float]]) -> Spans:
    out = []
    reqs = [e for e in events if e["ev"] in ("request_admit", "request_finish")]
    times = [e["t"] for e in reqs]
    ordered = all(x <= y for x, y in zip(times, times[1:], strict=False))  # cut, not scanned
    for a, b in windows:
        engine: dict[tuple[int, int], int] = {}
        start, last = math.inf, {}
        for e in reqs[bisect_left(times, a):bisect_left(times, b)] if ordered else [
                e for e in reqs if a <= e["t"] < b]:
            if e["ev"] == "request_admit":
                engine[(e["group"], e["sample"])] = e["engine"]
                start = min(start, e["t"])
            elif e["ev"] == "request_finish" and (e["group"], e["sample"]) in engine:
                r = engine[(e["group"], e["sample"])]
                last[r] = max(last.get(r, e["t"]), e["t"])
        if last:
            out.append((start, [last[r] for r in sorted(last)]))
    return out


def _from_records(records: dict[float, dict[str, Any]], windows: list[tuple[float, float]]
                  ) -> Spans:
    """The records (harness/sim/replica_windows.py), one a window, keyed by its start: the
    events' figures where no request crosses a window's edge (a colocated round)."""
    out = []
    for a, _ in windows:
        record = records.get(a)
        if record is not None and record["first_admit"] is not None and record["last_finish"]:
            out.append((record["first_admit"], [t for _, t in record["last_finish"]]))
    return out


def optimizer_spans(events: list[dict[str, Any]]) -> list[TrainSpan]:
    """Each optimizer step as a span from the training it follows (its last train_end) to
    its optimizer_step: verl's update_actor times the optimizer's steps with the
    mini-batches' forward and backward (the kernel trainer's per-step fixed cost is
    there)."""
    out, last = [], None
    for e in events:
        if e["ev"] == "train_end":
            last = e["t"]
        elif e["ev"] == "optimizer_step" and last is not None:
            out.append(TrainSpan(-1, last, e["t"], {}))
            last = None
    return out


def replica_kinds(cfg: RunConfig) -> tuple[str, ...]:
    """What `replica_times` reads, of a colocated run only (`summary`): a run apart then
    keeps no admission or finish event, so its pool makes none (two a request)."""
    return ("request_admit", "request_finish") if cfg.sim.placement == "colocated" else ()


@reads("run_start", "rollout_start", "rollout_complete", "train_start", "train_end",
       "optimizer_step", "decision", "placement_switch", "run_end", also=replica_kinds,
       instead={WINDOWS: ("request_admit", "request_finish")})
def summary(events: list[dict[str, Any]]) -> dict[str, float]:
    """A run's mean step, gen and training seconds, per the module's readings.

    Windows: between parameter syncs (fully async, the first left out) or between round
    starts (colocated, the last round ending at the run's end, the first left out: its
    engine starts awake; one-step-off, whose next round starts as this one trains, without
    its first and last). A colocated gen runs to the window's first training (verl's gen
    holds both sides of the switch, module docstring); its replicas' mean generation
    (verl's generate_sequences) and the longest's lead over it are `replica_times`."""
    spans = train_spans(events) + optimizer_spans(events)
    syncs = [e["t"] for e in events if e["ev"] == "decision" and e.get("what") == "param_sync"]
    end = events[-1]["t"]
    if syncs:
        edges = syncs
    else:
        edges = [e["t"] for e in events if e["ev"] == "rollout_start"] + [end]
    windows = list(zip(edges[:-1], edges[1:], strict=True))
    skip = 0
    if events[0].get("system") == "verl-one-step-off":  # its fill and its drain left out
        skip, windows = 1, windows[1:-1]
    colocated = any(e["ev"] == "placement_switch" for e in events)
    if colocated and len(windows) > 1:
        windows = windows[1:]
    walls = np.array([b - a for a, b in windows])
    train = np.array([busy(spans, a, b) for a, b in windows])
    if syncs:
        gen = walls - train
    elif colocated:
        gen = np.array([min((sp.start for sp in spans if a <= sp.start < b), default=b) - a
                        for a, b in windows])
    else:
        done = [e["t"] for e in events if e["ev"] == "rollout_complete"][skip:]
        gen = np.array([d - a for (a, _), d in zip(windows, done, strict=False)])
    spread = replica_times(events, windows) if colocated else (math.nan, math.nan)
    return {"step_s": float(walls.mean()), "gen_s": float(gen.mean()),
            "generate_s": spread[0], "lead_s": spread[1],
            "wait_s": float((walls - train).mean()),
            "train_s": float(train.mean()), "windows": float(len(windows)),
            "step_sd_s": float(walls.std(ddof=1)) if len(walls) > 1 else math.nan}
