"""Closed-form bounds on ROLL Flash's generation and step times, held against its traces.

ROLL Flash (arXiv 2510.11345) states "theoretical bounds on generation and end-to-end
times" for queue scheduling and its async ratio (abstract). The stored copies of the paper
reachable here hold its abstract and introduction only, not those equations, so the bounds
below are the classical ones its queue scheduling is an instance of, not transcriptions:

- Generation (queue scheduling is greedy list scheduling: a sample starts as soon as one
  of W slots is free). For one step's samples, taking d_i seconds each on a slot, the
  makespan T lies in [max(sum d / W, max d), sum d / W + (1 - 1/W) max d] (Graham 1966,
  "Bounds for certain multiprocessing anomalies", Bell System Tech. J. 45, Theorem 1).
  The upper end is the long tail's cost: one slot finishes the longest alone.
- End-to-end, synchronous (ratio 0): a step is its generation, then its training:
  T_gen + T_train. Asynchronous (ratio >= 1): generation overlaps training, so a step
  takes at least max(T_train, sum d / n) in the steady state, n the samples that may
  generate at once: the W slots, or the ratio's budget of ceil((ratio + 1) B) groups of
  K, whichever is fewer (Little's law: either the trainer or the n live samples are busy
  the whole step). ROLL's window adds one more: a group is trained at most ceil(ratio)
  steps after the step it began in, so ceil(ratio) + 1 steps last at least its longest
  sample, and a step at least max d / (ceil(ratio) + 1) on average.

`step_rows` reads a roll-flash trace into these quantities per optimizer step: d_i a trained
sample's seconds in the engine (admit to finish, summed over its attempts), W the slots (the
engines' running cap, at most roll_flash.max_running_requests each), T_train the batch's
train span. The sample durations come out of the simulated engine, whose per-token time
depends on how many sequences share it, so the bounds are checked against the schedule the
engine produced, not against an engine of their own.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


def generation_bounds(durations: Sequence[float], slots: int) -> tuple[float, float]:
    """(lower, upper) makespan of greedy list scheduling of `durations` on `slots`
    servers, all available at once (Graham's Theorem 1)."""
    if not durations or slots < 1:
        raise ValueError("generation_bounds: needs durations and at least one slot")
    total, longest = sum(durations), max(durations)
    return max(total / slots, longest), total / slots + (1 - 1 / slots) * longest


def in_flight(slots: int, ratio: float, batch: int, group_size: int) -> int:
    """Samples generating at once at most: the slots, or the async ratio's budget of
    ceil((ratio + 1) x B) groups of K (systems/staleness_gate.py), whichever is fewer."""
    return min(slots, (math.ceil(ratio * batch) + batch) * group_size)


def step_bounds(durations: Sequence[float], slots: int, train_s: float,
                live: int | None = None, window: int = 0) -> dict[str, float]:
    """A step's closed forms: the synchronous time (generation's bounds plus training);
    the asynchronous steady-state floor max(T_train, sum d / live), `live` the samples
    generating at once (`in_flight`; default: the slots), by Little's law: a step's
    samples take sum d slot-seconds, at most `live` at a time; and the window's floor,
    max d / (window + 1): a sample trained in step s began after step s - window - 1
    ended, so the window + 1 steps up to s last at least its d (a mean over steps)."""
    low, high = generation_bounds(durations, slots)
    floor = max(train_s, sum(durations) / (live or slots))
    return {"gen_low_s": low, "gen_high_s": high, "sync_low_s": low + train_s,
            "sync_high_s": high + train_s, "async_floor_s": floor,
            "window_floor_s": max(floor, max(durations) / (window + 1))}


@dataclass
class StepRow:
    step: int
    samples: int
    gen_s: float  # first submit to last finish of the step's trained samples
    train_s: float
    step_s: float  # train end to train end (the first: from the run's start)
    bounds: dict[str, float]


def _slots(head: dict[str, Any]) -> int:
    cfg = head["config"]
    per = min(cfg["sim"]["max_running"], cfg["roll_flash"]["max_running_requests"])
    return per * cfg["sim"]["rollout_engines"]


def step_rows(events: Sequence[dict[str, Any]]) -> list[StepRow]:
    """Per optimizer step of a roll-flash trace: its times and the closed forms."""
    head = events[0]
    slots = _slots(head)
    admitted: dict[tuple[int, int], float] = {}
    busy: dict[tuple[int, int], float] = defaultdict(float)
    first: dict[int, float] = {}
    last: dict[int, float] = {}
    batches: list[tuple[int, list[int]]] = []
    spans: dict[int, list[float]] = {}
    for e in events:
        ev = e["ev"]
        if ev == "request_submit":
            first.setdefault(e["group"], e["t"])
        elif ev == "request_admit":
            admitted[(e["group"], e["sample"])] = e["t"]
        elif ev == "request_finish":
            key = (e["group"], e["sample"])
            busy[key] += e["t"] - admitted.pop(key, e["t"])
            last[e["group"]] = e["t"]
        elif ev == "batch_dispatch":
            batches.append((e["batch"], e["groups"]))
        elif ev == "train_start":
            spans[e["batch"]] = [e["t"], e["t"]]
        elif ev == "train_end":
            spans[e["batch"]][1] = e["t"]
    rows, before = [], 0.0
    cfg = head["config"]
    k = cfg["group_size"]
    live = in_flight(slots, cfg["roll_flash"]["async_generation_ratio"],
                     cfg["update_groups"], k)
    for step, (batch, groups) in enumerate(batches):
        durations = [busy[(g, s)] for g in groups for s in range(k)]
        start, end = spans[batch]
        gen = max(last[g] for g in groups) - min(first[g] for g in groups)
        rows.append(StepRow(step, len(durations), gen, end - start, end - before,
                            step_bounds(durations, slots, end - start, live,
                                        math.ceil(cfg["roll_flash"]["async_generation_ratio"]))))
        before = end
    return rows


def steady_means(rows: Sequence[StepRow], skip: int = 2) -> dict[str, float]:
    """Means over the steps after the first `skip` (the pipeline's fill): the realised
    step and generation times beside the closed forms."""
    kept = rows[skip:] or rows
    keys = ("gen_low_s", "gen_high_s", "sync_low_s", "sync_high_s", "async_floor_s",
            "window_floor_s")
    out = {key: sum(r.bounds[key] for r in kept) / len(kept) for key in keys}
    out["step_s"] = sum(r.step_s for r in kept) / len(kept)
    out["gen_s"] = sum(r.gen_s for r in kept) / len(kept)
    return out
