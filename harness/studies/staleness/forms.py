"""The closed forms of mean staleness, fed with one run's own measurements.

For each fully asynchronous run of the staleness study, this reads from its trace,
over the study's steady window (`traces.steady_figures`, the yardstick's rule), what
the closed forms of `harness.studies.analytic.staleness_forms` take, and what they
predict beside what the run did:

- `T` seconds per optimizer update (the window over its steps); `B` samples a batch
  trains (U x K);
- `W` each trained sample's time in the system, first submission to its batch's
  `train_start`, averaged over the window's samples (`W_tok`: weighted by their
  response tokens, as the study's lag is); `L` the time-average of samples submitted
  and not yet trained or dropped;
- `C` the time-average of requests generating (admitted, not finished or preempted);
  `M` the tailness E[max of a group] / E[length] of the window's trained groups;
  `rho` = (1 - trainer idle) / (1 - engine idle): v_R / v_T measured as the share of
  the window each side could not work for want of the other; `q` the most samples of
  complete groups waiting for the trainer at once, over B;
- the simulated lags: `sim_tok` the study's own (token-weighted, from the
  `optimizer_step` events), `sim` per sample (its batch's version less the version it
  began with), and that lag split where Applied Compute splits it: `sim_pre`, versions
  crossed before its group completed, and `sim_in`, after (`sim` = `sim_pre` + `sim_in`);
  `steps_seen` the updates that ended between its submission and its training, and
  `unpublished` = `sim` - `steps_seen`: updates done but not yet on its engine when
  it began (the publish delay, and verl's sync every `trigger` steps);
- the predictions: `little` = W / T, `little_tok` = W_tok / T, `little_L` = L / B,
  `ac` = Applied Compute's PQS + IQS with (C, M, B, rho, q), `ac_pre` its PQS, and
  `ac_exp` the same with M for exponential lengths (H_K) instead of the measured M.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from typing import Any

from harness.analysis import spans
from harness.studies.analytic import staleness_forms as forms
from harness.studies.staleness.traces import TraceProblem, steady_figures

# The study's fully asynchronous systems: a sample may be trained steps after the one it
# began in, with no round boundary that empties the pipeline.
ASYNC = ("verl-fully-async", "verl-dynamic", "areal", "roll-flash", "prime-rl", "skyrl-async",
         "tinker", "pipelinerl", "nemo-rl-async", "slime-async", "laminar")


def _level(changes: Sequence[tuple[float, int]], t0: float, t1: float) -> tuple[float, int]:
    """(time-average over [t0, t1], most at once within it) of a count that moves by
    each (time, delta), in time order."""
    level, most, area, prev = 0, 0, 0.0, t0
    for t, delta in sorted(changes, key=lambda c: c[0]):
        area += level * spans.overlap(prev, t, t0, t1)
        prev = max(prev, t)
        level += delta
        if t0 <= t <= t1:
            most = max(most, level)
    area += level * spans.overlap(prev, t1, t0, t1)
    return area / (t1 - t0), most


def _at(changes: Sequence[tuple[float, int]], instants: Sequence[float]) -> float:
    """The mean, over `instants`, of a count that moves by each (time, delta), each
    taken just before its instant (a change at the instant itself not yet made)."""
    ordered = sorted(changes, key=lambda c: c[0])
    times = [t for t, _ in ordered]
    running = [0]
    for _, delta in ordered:
        running.append(running[-1] + delta)
    return sum(running[bisect.bisect_left(times, t)] for t in instants) / len(instants)


def measure(events: Sequence[dict[str, Any]]) -> dict[str, float]:
    """One run's inputs, predictions and simulated lags (see the module's docstring)."""
    fig = steady_figures(events)
    if math.isnan(fig["window_s"]):
        raise TraceProblem("no steady window (see harness/core/yardstick.py)")
    config = events[0].get("config") or {}
    k = int(config["group_size"])
    steps = [e for e in events if e["ev"] == "optimizer_step"]
    warmup, drain = int(fig["warmup_steps"]), int(fig["drain_steps"])
    n = len(steps)
    t0 = steps[warmup - 1]["t"] if warmup else events[0]["t"]
    t1 = steps[n - drain - 1]["t"]
    window = {id(s) for s in steps[warmup:n - drain]}

    submit: dict[tuple[int, int], float] = {}
    final: dict[tuple[int, int], dict[str, Any]] = {}
    complete: dict[int, float] = {}
    batch_groups: dict[int, list[int]] = {}
    started: dict[int, float] = {}
    trained: list[tuple[int, int]] = []  # (batch, version it trains) of the window's steps
    step_times = [s["t"] for s in steps]
    generating: list[tuple[float, int]] = []  # requests admitted, not finished
    admitted: set[tuple[int, int]] = set()
    system: list[tuple[float, int]] = []  # samples submitted, not trained or dropped
    queued: list[tuple[float, int]] = []  # samples of complete groups, not dispatched
    last_end: int | None = None
    for e in events:
        ev = e["ev"]
        if ev == "request_submit":
            key = (e["group"], e["sample"])
            if key not in submit:
                submit[key] = e["t"]
                system.append((e["t"], 1))
        elif ev == "request_admit":
            admitted.add((e["group"], e["sample"]))
            generating.append((e["t"], 1))
        elif ev in ("request_finish", "request_preempt"):
            if (e["group"], e["sample"]) in admitted:  # not one aborted while it queued
                admitted.discard((e["group"], e["sample"]))
                generating.append((e["t"], -1))
            if ev == "request_finish" and e["status"] == "finished":
                final[(e["group"], e["sample"])] = e
        elif ev == "group_complete":
            complete.setdefault(e["group"], e["t"])
            queued.append((e["t"], k))
        elif ev == "batch_dispatch":
            batch_groups[e["batch"]] = e["groups"]
            queued += [(e["t"], -k) for g in e["groups"] if g in complete]
        elif ev == "train_start":
            if e["batch"] not in started:
                started[e["batch"]] = e["t"]
                system += [(e["t"], -k) for _ in batch_groups.get(e["batch"], ())]
        elif ev == "train_end":
            last_end = e["batch"]
        elif ev == "optimizer_step" and last_end is not None:
            if id(e) in window:
                trained.append((last_end, e["version"] - 1))
            last_end = None
        elif ev == "decision" and e["what"] in ("drop_group", "discard_groups"):
            gone = e.get("groups", [e.get("group")])
            system += [(e["t"], -k) for g in gone if g is not None]
            queued += [(e["t"], -k) for g in gone if g in complete]

    rows: list[dict[str, float]] = []
    groups: list[list[float]] = []
    for batch, version in trained:
        for g in batch_groups[batch]:
            lengths = []
            for s in range(k):
                fin = final.get((g, s))
                if fin is None or (g, s) not in submit:
                    continue
                t_in, t_train = submit[(g, s)], started[batch]
                seen = sum(1 for t in step_times if t_in < t <= t_train)
                before = bisect.bisect_right(step_times, t_in)  # updates ended by t_in
                last = step_times[before - 1] if before else events[0]["t"]
                nxt = step_times[before] if before < len(step_times) else math.nan
                lag = version - fin["versions"][0]
                in_queue = sum(1 for t in step_times if complete.get(g, t_train) < t <= t_train)
                rows.append({"w": t_train - t_in, "tokens": fin["response_tokens"],
                             "lag": lag, "seen": seen, "in": in_queue,
                             "phase": (t_in - last) / (nxt - last) if nxt > last else 0.0})
                lengths.append(float(fin["response_tokens"]))
            if lengths:
                groups.append(lengths)
    if not rows:
        raise TraceProblem("no trained sample in the steady window")
    b = int(config["update_groups"]) * k
    period = (t1 - t0) / len(trained)
    tokens = sum(r["tokens"] for r in rows)
    w = sum(r["w"] for r in rows) / len(rows)
    w_tok = sum(r["w"] * r["tokens"] for r in rows) / tokens
    c, _ = _level(generating, t0, t1)
    in_system, _ = _level(system, t0, t1)
    _, most_queued = _level(queued, t0, t1)
    at_updates = _at(system, [s["t"] for s in steps[warmup:n - drain]])
    busy_t, busy_r = 1 - fig["trainer_idle"], 1 - fig["rollout_idle"]
    rho = busy_t / busy_r if busy_r > 0 else math.nan
    m = forms.group_tailness(groups)
    q = most_queued / b
    sim = sum(r["lag"] for r in rows) / len(rows)
    sim_in = sum(r["in"] for r in rows) / len(rows)
    seen = sum(r["seen"] for r in rows) / len(rows)
    ac = forms.ac_staleness(c, m, b, rho, q) if rho > 0 else math.nan
    return {
        "T": period, "B": b, "W": w, "W_tok": w_tok, "L": in_system, "C": c, "M": m,
        "rho": rho, "q": q,
        "sim_tok": fig["lag_mean"], "sim": sim, "sim_pre": sim - sim_in, "sim_in": sim_in,
        "steps_seen": seen, "unpublished": sim - seen,
        "little": forms.little_lag(w, period), "little_tok": forms.little_lag(w_tok, period),
        "little_L": forms.little_lag_in_flight(in_system, b),
        "phase": sum(r["phase"] for r in rows) / len(rows),
        "L_upd": forms.little_lag_in_flight(at_updates, b),
        "M_iid": forms.iid_tailness([x for g in groups for x in g], k),
        "ac": ac, "ac_pre": forms.ac_pre_queue(c, m, b, rho) if rho > 0 else math.nan,
        "ac_in": forms.ac_in_queue(rho, q) if rho > 0 else math.nan,
        "ac_exp": (forms.ac_staleness(c, forms.exponential_tailness(k), b, rho, q)
                   if rho > 0 else math.nan),
    }


def cell_row(folder: str) -> dict[str, Any] | None:
    """One finished cell's row: what it ran and `measure`'s figures; None for a cell
    without a trace (failed) or whose run has no steady window."""
    from harness.core.trace_io import find_trace
    from harness.studies.staleness import grid
    from harness.studies.staleness.summary import setting_label, split_label
    from harness.studies.staleness.traces import read_events

    trace = find_trace(folder)
    if not trace.exists():
        return None
    events = read_events(trace)
    head = events[0]
    config = head.get("config") or {}
    knob, value = grid.setting(head["system"], config)
    try:
        figures = measure(events)
    except TraceProblem:
        return None
    return {"system": head["system"], "split": split_label(config),
            "setting": setting_label(knob, value), "seed": head.get("seed"), **figures}


SHOWN = ("rho", "q", "M", "C", "sim", "sim_tok", "little", "L_upd", "phase", "ac", "ac_exp",
         "M_iid", "sim_pre", "sim_in", "ac_pre", "ac_in", "little_L", "little_tok")
ERRORS = ("little", "little_tok", "little_L", "L_upd", "ac", "ac_exp")
PARTS = (("ac_pre", "sim_pre"), ("ac_in", "sim_in"))


def read_cells(out: Any, systems: Sequence[str], read: Callable[[str], Any],
               jobs: int = 1) -> list[Any]:
    """`read` of each finished cell under OUT/cells whose system is one of `systems`
    (known from the cell's result.json, so other systems' traces are not read), in
    `jobs` processes; the Nones it gives left out."""
    import json
    from concurrent.futures import ProcessPoolExecutor
    from pathlib import Path

    folders = []
    for cell in sorted(Path(out, "cells").glob("*/result.json")):
        try:
            result = json.loads(cell.read_text())
        except (OSError, ValueError):
            continue
        if not result.get("error") and (result.get("config") or {}).get("system") in systems:
            folders.append(str(cell.parent))
    if jobs > 1 and len(folders) > 4:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            found = list(pool.map(read, folders, chunksize=4))
    else:
        found = [read(f) for f in folders]
    return [r for r in found if r is not None]


def rows(out: Any, systems: Sequence[str], jobs: int = 1) -> list[dict[str, Any]]:
    """`cell_row` of the study's finished cells of `systems`."""
    return read_cells(out, systems, cell_row, jobs)


def settings(found: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per system, split and setting: the means over its seeds of SHOWN."""
    import pandas as pd

    if not found:
        return []
    frame = pd.DataFrame(found)
    keys = ["system", "split", "setting"]
    means = frame.groupby(keys, sort=True)[list(SHOWN)].mean().reset_index()
    seeds = frame.groupby(keys, sort=True)["seed"].nunique().reset_index(drop=True)
    means.insert(3, "seeds", seeds)
    return means.to_dict("records")


def errors(found: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per system (and `all`): the runs, the mean simulated per-sample lag, and each
    prediction's mean error against it (prediction - simulated, in steps) and mean
    absolute error."""
    import pandas as pd

    if not found:
        return []
    frame = pd.DataFrame(found)
    out = []
    for name, part in [*frame.groupby("system", sort=True), ("all", frame)]:
        row: dict[str, Any] = {"system": name, "runs": len(part), "sim": part["sim"].mean()}
        for key in ERRORS:
            diff = part[key] - part["sim"]
            row[f"{key}_err"] = diff.mean()
            row[f"{key}_abs"] = diff.abs().mean()
        for key, sim in PARTS:  # Applied Compute's two terms against the same split
            row[f"{key}_err"] = (part[key] - part[sim]).mean()
        out.append(row)
    return out
