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


def _mean_in_flight(changes: list[tuple[float, int]], bounds: list[tuple[float, float]]
                    ) -> list[float]:
    """The time-averaged count of sequences in flight over each [start, end) of
    `bounds` (in order, adjacent), from the (t, +1/-1) changes in one sweep."""
    out, level, i = [], 0, 0
    for start, end in bounds:
        while i < len(changes) and changes[i][0] <= start:  # the level at the start
            level += changes[i][1]
            i += 1
        area, at = 0.0, start
        while i < len(changes) and changes[i][0] < end:
            t, step = changes[i]
            area += level * (t - at)
            level, at, i = level + step, t, i + 1
        area += level * (end - at)
        out.append(area / (end - start) if end > start else float(level))
    return out


def restate(events: Sequence[dict[str, Any]], owners: Sequence[int | None],
            rows: list[dict[str, Any]], starts: dict[int, float],
            versions: dict[int, int]) -> None:
    """Rewrite a streaming trace's rows (those of `round_metrics`, whose position-based
    `owners` it shares): token figures by generation, and each round's phase."""
    submitted_in: dict[tuple[int, int], int] = {}
    resumed: dict[tuple[int, int], int] = {}
    tokens_by_version: dict[int, int] = defaultdict(int)
    finished_in: dict[int, list[int]] = defaultdict(list)
    changes: list[tuple[float, int]] = []  # (t, +1 submitted / -1 finished)
    last_submit = -math.inf
    for e, owner in zip(events, owners, strict=True):
        if e["ev"] == "request_submit":
            key = (e["group"], e["sample"])
            submitted_in[key], resumed[key] = e["round"], e.get("resumed_tokens", 0)
            last_submit = e["t"]
            changes.append((e["t"], 1))
        elif e["ev"] == "request_finish" and owner is not None:
            key = (e["group"], e["sample"])
            if key not in submitted_in:
                continue
            changes.append((e["t"], -1))
            if e["status"] == "finished":
                finished_in[owner].append(e["response_tokens"])
            spans = e.get("version_spans")
            if spans is None:  # only [first, last] known: count it all as the first
                first = e["versions"][:1]
                spans = [[first[0], e["response_tokens"]]] if first else []
            for version, n in _new_spans(spans, resumed[key]):
                tokens_by_version[version] += n
    order = sorted(starts)
    served = [versions[r] for r in order]  # non-decreasing: versions only advance
    tokens: dict[int, int] = defaultdict(int)
    for version, n in tokens_by_version.items():
        tokens[order[max(0, bisect.bisect_right(served, version) - 1)]] += n
    level = peak = 0
    for _, step in changes:
        level += step
        peak = max(peak, level)
    ends = [starts[r] for r in order[1:]] + [events[-1]["t"]]
    mean = dict(zip(order, _mean_in_flight(changes, [(starts[r], end) for r, end in
                                                      zip(order, ends, strict=True)]),
                    strict=True))
    end_of = dict(zip(order, ends, strict=True))
    for row in rows:
        rnd = row["round"]
        done = row["rollout_complete_s"]
        made = finished_in.get(rnd, [])
        row["mean_response_tokens"] = sum(made) / len(made) if made else math.nan
        row["rollout_tokens_per_s"] = tokens[rnd] / done if done > 0 else math.nan
        full = mean[rnd] >= FULL * peak
        row["phase"] = ("warm-up" if rnd == order[0] else
                        "drain" if end_of[rnd] > last_submit and not full else "steady")
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
