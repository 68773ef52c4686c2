"""Per-round figures of a streaming run, whose requests cross rounds (PipelineRL).

A synchronous system's round holds its own requests: they are submitted after
its `rollout_start` and finish before the next, so a figure of the requests
submitted in a round is a figure of that round. A streaming system has no
rollout boundary (a "round" is a block of optimizer steps) and keeps up to H
sequences in flight across it: counted by the round they were submitted in,
all tokens of a large enough run fall in its first rounds and the rest show
none. So for a trace where a request finishes in a later round than it was
submitted in:

- tokens count in the round they were generated in: a response's
  `version_spans` say which policy version made each token, and version v was
  served from the `rollout_start` whose version is the last at or below v;
- `mean_response_tokens` is over the responses that finished in the round;
- each round gets a `phase`: `warm-up` (the first, where the trainer waits for
  its first batch while the pipeline fills, and the rounds after it while the
  policy lag is still below 90% of the highest round's outside the drain: the
  pipeline is not full until samples are as stale as it keeps them), `drain`
  (a round that ends after the last request was submitted and whose
  time-averaged sequences in flight fall below 90% of the run's peak: no new
  work enters, and the last batches hold the longest responses, which reads as
  a slowdown), else `steady`.

`steady_summary` gives the figures of the steady rounds alone: what a
streaming system sustains, which the warm-up and the drain of a finite run
would otherwise blur.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

PHASES = ("warm-up", "steady", "drain")
FULL = 0.9  # a round whose mean in-flight count is below this share of the peak is not full


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


class RoundFlow:
    """Collects, event by event, what a streaming trace's rounds need; `crosses` says
    whether the trace is one (some request finished in a later round)."""

    def __init__(self) -> None:
        self.crosses = False
        self.tokens_by_version: dict[int, int] = defaultdict(int)
        self.finished_in: dict[int, list[int]] = defaultdict(list)
        self.last_submit = -math.inf
        self.changes: list[tuple[float, int]] = []  # (t, +1 submitted / -1 finished)

    def submit(self, event: dict[str, Any]) -> None:
        self.last_submit = event["t"]
        self.changes.append((event["t"], 1))

    def finish(self, event: dict[str, Any], submitted_in: int | None, owner: int | None,
               resumed: int) -> None:
        if submitted_in is None or owner is None:
            return
        self.changes.append((event["t"], -1))
        self.crosses |= owner != submitted_in
        if event["status"] == "finished":
            self.finished_in[owner].append(event["response_tokens"])
        spans = event.get("version_spans")
        if spans is None:  # only [first, last] known: count it all as the first
            first = event["versions"][:1]
            spans = [[first[0], event["response_tokens"]]] if first else []
        for version, n in _new_spans(spans, resumed):
            self.tokens_by_version[version] += n

    def _mean_in_flight(self, start: float, end: float) -> float:
        """The time-averaged count of sequences in flight over [start, end)."""
        level, area, at = 0, 0.0, start
        for t, step in self.changes:  # in trace order: t never goes back
            if t > start:
                area += level * (min(t, end) - at)
                at = min(t, end)
            if t >= end:
                break
            level += step
        area += level * (end - at) if at < end else 0.0
        return area / (end - start) if end > start else float(level)

    def apply(self, rows: list[dict[str, Any]], starts: dict[int, float],
              versions: dict[int, int], run_end: float) -> None:
        """Rewrite the rows' token figures by generation and mark their phases."""
        order = sorted(starts)
        served = [versions[r] for r in order]  # non-decreasing: versions only advance
        tokens: dict[int, int] = defaultdict(int)
        for version, n in self.tokens_by_version.items():
            i = max(0, bisect.bisect_right(served, version) - 1)
            tokens[order[i]] += n
        level = peak = 0
        for _, step in self.changes:
            level += step
            peak = max(peak, level)
        ends = {r: starts[n] for r, n in zip(order, order[1:], strict=False)}
        for row in rows:
            rnd = row["round"]
            end = ends.get(rnd, run_end)
            done = row["rollout_complete_s"]
            made = self.finished_in.get(rnd, [])
            row["mean_response_tokens"] = sum(made) / len(made) if made else math.nan
            row["rollout_tokens_per_s"] = tokens[rnd] / done if done > 0 else math.nan
            full = self._mean_in_flight(starts[rnd], end) >= FULL * peak
            row["phase"] = ("warm-up" if rnd == order[0] else
                            "drain" if end > self.last_submit and not full else "steady")
        _warm_up_while_lag_rises(rows)


def _warm_up_while_lag_rises(rows: list[dict[str, Any]]) -> None:
    """The rounds after the first stay `warm-up` until the mean lag reaches 90% of the
    highest round mean outside the drain."""
    lags = [r["lag_mean"] for r in rows if r["phase"] != "drain"
            and not math.isnan(r.get("lag_mean", math.nan))]
    if not lags:
        return
    top = max(lags)
    for row in rows[1:]:
        lag = row.get("lag_mean", math.nan)
        if row["phase"] != "steady" or math.isnan(lag) or lag >= FULL * top:
            break
        row["phase"] = "warm-up"


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
