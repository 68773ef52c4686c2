"""Per-round figures of a streaming run, whose requests cross rounds (PipelineRL).

A synchronous system's round holds its own requests: they are submitted after
its `rollout_start` and finish before the next, so a figure of the requests
submitted in a round is a figure of that round. A streaming system has no
rollout boundary (a "round" is a block of optimizer steps) and keeps up to H
sequences in flight across it: counted by the round they were submitted in,
all tokens of a large enough run fall in its first rounds and the rest show
none. So for a trace where a request finishes in a later round than it was
submitted in:

- tokens count in the round they were generated in, by time: a response's
  `version_spans` say which policy version made each token, in order; the tokens
  of version v were made after the request was submitted, after v was first
  published (`weights_published`; a trace without it: the `rollout_start` whose
  version is the last at or below v) and after the span before, up to the next
  span's start or the finish; each span is spread evenly over that stretch and
  split among the rounds' windows (a round's `rollout_start` to the next's). Where
  the engines run the trainer's latest weights (PipelineRL's in-flight updates)
  this is the round that served v, as before; Laminar's replicas pull weights
  only at their batches' ends, so an old version's tokens are made rounds after
  it was served, and counted by version they left steady rounds at 0 tok/s. The
  spread is even from the submission (admissions are not read: the simulator
  decodes none for these figures), so time a request waits queued counts as
  time it generates;
- `mean_response_tokens` is over the responses that finished in the round;
- each round gets a `phase` by the one rule every system is measured by
  (harness.core.yardstick's steady window of optimizer steps): `warm-up` when one
  of its optimizer steps comes before the window (it trains the pipeline's first
  fill), `drain` when one comes after it (no new group enters), else `steady`; a
  round with no step of its own goes by when it started, and every round is
  `warm-up` in a run with no window.

`steady_summary` gives the figures of the steady rounds alone; the yardstick's
figures (`rolloutbench metrics` prints them under the table) are what the run
delivered over the same window.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any


def _new_spans(spans: list[list[int]], resumed: int) -> list[tuple[int, int]]:
    """(version, tokens) of the tokens this attempt generated: a resumed response's
    spans begin with its carried prefix, generated (and counted) before."""
    out = []
    for version, tokens in spans:
        skip = min(resumed, tokens)
        resumed -= skip
        if tokens > skip:
            out.append((version, tokens - skip))
    return out


class Windows:
    """Tokens credited to the rounds' windows of time: round `order[i]` from `times[i]`
    to `times[i + 1]` (the first from the run's start, the last to its end)."""

    def __init__(self, order: list[int], times: list[float]) -> None:
        self.order, self.times = order, times
        self.tokens: dict[int, float] = defaultdict(float)

    def credit(self, start: float, end: float, n: int) -> None:
        """`n` tokens made evenly from `start` to `end` (all at `start` if no time
        passed): each window gets its share of that time."""
        i = max(0, bisect.bisect_right(self.times, start) - 1)
        if end <= start:
            self.tokens[self.order[i]] += n
            return
        while True:
            stop = self.times[i + 1] if i + 1 < len(self.times) else math.inf
            begin = max(start, self.times[i]) if i else start
            self.tokens[self.order[i]] += n * (min(end, stop) - begin) / (end - start)
            if end <= stop:
                return
            i += 1


def restate(events: Sequence[dict[str, Any]], owners: Sequence[int | None],
            rows: list[dict[str, Any]], starts: dict[int, float],
            versions: dict[int, int]) -> None:
    """Rewrite a streaming trace's rows (those of `round_metrics`, whose position-based
    `owners` it shares): token figures by generation, and each round's phase."""
    order = sorted(starts)
    windows = Windows(order, [starts[r] for r in order])
    served = [versions[r] for r in order]  # non-decreasing: versions only advance
    published: dict[int, float] = {}
    for e in events:
        if e["ev"] == "weights_published":
            published.setdefault(e["version"], e["t"])

    def ready(version: int) -> float:
        """When tokens of `version` could first be made."""
        if version in published:
            return published[version]
        return starts[order[max(0, bisect.bisect_right(served, version) - 1)]]

    submitted_at: dict[tuple[int, int], float] = {}
    resumed: dict[tuple[int, int], int] = {}
    finished_in: dict[int, list[int]] = defaultdict(list)
    for e, owner in zip(events, owners, strict=True):
        if e["ev"] == "request_submit":
            key = (e["group"], e["sample"])
            submitted_at[key], resumed[key] = e["t"], e.get("resumed_tokens", 0)

        elif e["ev"] == "request_finish" and owner is not None:
            key = (e["group"], e["sample"])
            if key not in submitted_at:
                continue
            if e["status"] == "finished":
                finished_in[owner].append(e["response_tokens"])
            spans = e.get("version_spans")
            if spans is None:  # only [first, last] known: count it all as the first
                first = e["versions"][:1]
                spans = [[first[0], e["response_tokens"]]] if first else []
            made = _new_spans(spans, resumed[key])
            begins, at = [], submitted_at[key]
            for version, _ in made:
                at = min(max(at, ready(version)), e["t"])
                begins.append(at)
            for i, (_, n) in enumerate(made):
                windows.credit(begins[i], begins[i + 1] if i + 1 < len(made) else e["t"], n)
    tokens = windows.tokens
    phases = _phases(events, owners, starts)
    for row in rows:
        rnd = row["round"]
        done = row["rollout_complete_s"]
        made = finished_in.get(rnd, [])
        row["mean_response_tokens"] = sum(made) / len(made) if made else math.nan
        row["rollout_tokens_per_s"] = tokens[rnd] / done if done > 0 else math.nan
        row["phase"] = phases.get(rnd, "steady")


def _phases(events: Sequence[dict[str, Any]], owners: Sequence[int | None],
            starts: dict[int, float]) -> dict[int, str]:
    """Each round's phase by the yardstick's steady window (see the module's docstring);
    every round `warm-up` when the run has no window."""
    from harness.core.yardstick import window

    win, _ = window(events)
    numbers: dict[int, list[int]] = defaultdict(list)  # round -> its steps' 1-based numbers
    n = 0
    for e, owner in zip(events, owners, strict=True):
        if e["ev"] == "optimizer_step":
            n += 1
            if owner is not None:
                numbers[owner].append(n)
    first, last = (win.first, win.last) if win is not None else (n + 1, n)
    out = {}
    for rnd, t in starts.items():
        steps = numbers.get(rnd)
        if steps:
            out[rnd] = ("warm-up" if min(steps) < first else "drain" if max(steps) > last
                        else "steady")
        elif win is None:
            out[rnd] = "warm-up"
        else:
            out[rnd] = ("warm-up" if t < win.start_s else "drain" if t >= win.end_s
                        else "steady")
    return out


def steady_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Tokens per second (all steady rounds' tokens over their time), lag and ESS
    means over the steady rounds of one run's rows; None for rows without phases
    (a synchronous run). `steady_rounds` is 0 when the run never reached one."""
    if not any("phase" in r for r in rows):
        return None
    steady = [r for r in rows if r.get("phase") == "steady"]
    time = sum(r["rollout_complete_s"] for r in steady)
    tokens = sum(r["rollout_tokens_per_s"] * r["rollout_complete_s"] for r in steady
                 if not math.isnan(r["rollout_tokens_per_s"]))

    def mean(key: str) -> float:
        values = [r[key] for r in steady if not math.isnan(r.get(key, math.nan))]
        return sum(values) / len(values) if values else math.nan

    return {"system": rows[0]["system"], "workload": rows[0]["workload"],
            "steady_rounds": len(steady),
            "rounds": [r["round"] for r in steady],
            "warm_up": [r["round"] for r in rows if r.get("phase") == "warm-up"],
            "drain": [r["round"] for r in rows if r.get("phase") == "drain"],
            "tokens_per_s": tokens / time if time > 0 else math.nan,
            "lag_mean": mean("lag_mean"), "ess": mean("ess")}
