"""Per-round metrics, computed from a trace alone.

Any trace that follows the schema (simulated, live, or converted from another
system's logs) is analysed by the same code. A batch belongs to the round in
which it was dispatched (between that round's `rollout_start` and the next);
a request belongs to the round named in its `request_submit`.

Lower bound (`lower_bound_s`): no schedule of the round's work can end before

    max(t_U + C, t_last + c_last)

where t_U is when the first U groups were materialised (U = the size of the
round's first batch; the trainer cannot start earlier), C is the round's total
trainer compute, t_last is when the last group was materialised and c_last the
compute of the batch that holds it (that batch cannot start earlier). Both
terms come from the same run, so `efficiency` = bound / actual lies in (0, 1]
and says how much of the trainer's idle time the schedule could still recover.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

KEYS = (
    "rollout_to_train_end_s", "first_dispatch_s", "rollout_complete_s", "trainer_compute_s",
    "mean_response_tokens", "rollout_tokens_per_s", "waiting_ratio", "start_wait_ratio",
    "lower_bound_s", "efficiency",
)


def _nan() -> float:
    return float("nan")


def round_metrics(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One dict per round: `system`, `workload`, `round` and the `KEYS`."""
    head = events[0]
    starts: dict[int, float] = {}
    complete: dict[int, float] = {}
    group_round: dict[int, int] = {}
    materialized: dict[int, float] = {}
    finished_tokens: dict[int, list[int]] = defaultdict(list)
    all_tokens: dict[int, int] = defaultdict(int)
    dispatch: list[tuple[float, int, list[int]]] = []
    spans: dict[int, list[float]] = defaultdict(list)  # batch -> [start, end, start, end...]
    span_open = _nan()  # spans of one trainer never overlap: an end closes the open span

    for e in events:
        ev = e["ev"]
        if ev == "request_finish":
            rnd = group_round.get(e["group"])
            if rnd is not None:
                all_tokens[rnd] += e["response_tokens"] - e.get("resumed_tokens", 0)
                if e["status"] == "finished":
                    finished_tokens[rnd].append(e["response_tokens"])
        elif ev == "request_submit":
            group_round.setdefault(e["group"], e["round"])
        elif ev == "rollout_start":
            starts[e["round"]] = e["t"]
        elif ev == "rollout_complete":
            complete[e["round"]] = e["t"]
        elif ev == "group_materialized":
            materialized[e["group"]] = e["t"]
        elif ev == "batch_dispatch":
            dispatch.append((e["t"], e["batch"], list(e["groups"])))
        elif ev == "train_start":
            span_open = e["t"]
        elif ev == "train_end":
            spans[e["batch"]] += [span_open, e["t"]]

    order = sorted(starts)
    start_times = [starts[r] for r in order]
    by_round: dict[int, list[tuple[float, int, list[int]]]] = defaultdict(list)
    for d in dispatch:
        idx = bisect.bisect_right(start_times, d[0]) - 1
        if idx >= 0:
            by_round[order[idx]].append(d)

    out = []
    for rnd in order:
        t0 = starts[rnd]
        row: dict[str, Any] = {"system": head["system"], "workload": head["workload"],
                               "round": rnd}
        batches = by_round.get(rnd, [])
        ends = [spans[b][-1] for _, b, _ in batches if spans.get(b)]
        compute = {b: sum(s[i + 1] - s[i] for i in range(0, len(s), 2))
                   for _, b, _ in batches for s in [spans.get(b, [])]}
        total = sum(compute.values())
        end = max(ends) if ends else _nan()
        elapsed = end - t0
        done = complete.get(rnd, _nan()) - t0
        tokens = finished_tokens.get(rnd, [])
        first_start = min((spans[b][0] for _, b, _ in batches if spans.get(b)), default=_nan())
        row.update(
            rollout_to_train_end_s=elapsed,
            first_dispatch_s=(batches[0][0] - t0) if batches else _nan(),
            rollout_complete_s=done,
            trainer_compute_s=total,
            mean_response_tokens=sum(tokens) / len(tokens) if tokens else _nan(),
            rollout_tokens_per_s=all_tokens.get(rnd, 0) / done if done > 0 else _nan(),
            waiting_ratio=(elapsed - total) / elapsed if elapsed > 0 else _nan(),
            start_wait_ratio=(first_start - t0) / elapsed if elapsed > 0 else _nan(),
        )
        row["lower_bound_s"] = _lower_bound(batches, compute, materialized, t0)
        row["efficiency"] = row["lower_bound_s"] / elapsed if elapsed > 0 else _nan()
        out.append(row)
    return out


def _lower_bound(
    batches: list[tuple[float, int, list[int]]],
    compute: dict[int, float],
    materialized: dict[int, float],
    t0: float,
) -> float:
    if not batches:
        return _nan()
    ready = sorted((materialized[g], b) for _, b, gs in batches for g in gs if g in materialized)
    u = len(batches[0][2])
    if len(ready) < u:
        return _nan()
    t_u = ready[u - 1][0] - t0
    t_last, last_batch = ready[-1]
    return max(t_u + sum(compute.values()), t_last - t0 + compute.get(last_batch, 0.0))


def metrics_for_traces(paths: Iterable[str]) -> list[dict[str, Any]]:
    from harness.trace import read_trace

    rows: list[dict[str, Any]] = []
    for path in paths:
        rows.extend(round_metrics(read_trace(path)))
    return rows
