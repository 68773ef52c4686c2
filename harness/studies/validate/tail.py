"""The decode step, live against simulated, by how many sequences are running.

A cell's metrics say *that* live and simulated differ; this says *where* in the
engine's load. After a rollout's last admission no sequence joins, so between
two consecutive finishes the batch is fixed (those still running) and, since
both sides replay the same lengths in the same order, both take the same number
of decode steps. The ratio of the two sides' interval lengths is then the ratio
of their step times at that batch size: a direct reading of the calibrated step
model where the systems differ most (the tail of a rollout, a narrow frontier).

Only intervals whose two finishing requests are the same on both sides, that
follow both sides' last admission and that span at least one simulated step
count; a cell with aborts, preemptions after the last admission or a different
finishing order contributes what still matches, or nothing.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

LAST_BUCKET = 1024  # holds every larger batch too


def bucket(batch: int) -> int:
    """The smallest power of two at or above `batch` (the row it is counted in)."""
    return min(1 << (batch - 1).bit_length(), LAST_BUCKET)


def label(row: int) -> str:
    """A bucket's range of running sequences: 1, 2, 3-4, 5-8, ..."""
    return str(row) if row <= 2 else f"{row // 2 + 1}-{row}"


def _ends_after_last_admission(events: list[dict[str, Any]]
                               ) -> list[tuple[float, tuple[int, int], str, int]]:
    """(time, request, status, running before it) of every request that ends after
    the run's last admission, in order; `running` counts admitted requests not yet
    ended. A preemption changes the batch without an end: reading stops there."""
    last_admit = max((i for i, e in enumerate(events) if e["ev"] == "request_admit"),
                     default=None)
    if last_admit is None:
        return []
    running = 0
    for e in events[:last_admit + 1]:
        if e["ev"] == "request_admit":
            running += 1
        elif e["ev"] in ("request_finish", "request_preempt"):
            running -= 1
    out = []
    for e in events[last_admit + 1:]:
        if e["ev"] == "request_preempt":
            break
        if e["ev"] == "request_finish":
            out.append((e["t"], (e["group"], e["sample"]), e["status"], running))
            running -= 1
    return out


def intervals(live: list[dict[str, Any]], sim: list[dict[str, Any]]
              ) -> list[tuple[int, float, float]]:
    """(batch, live seconds, simulated seconds) of each interval between two
    consecutive finishes that are the same requests on both sides."""
    a, b = _ends_after_last_admission(live), _ends_after_last_admission(sim)
    out = []
    for (t0, r0, st0, _), (t1, r1, st1, n1), (s0, q0, _, _), (s1, q1, _, m1) in zip(
            a, a[1:], b, b[1:], strict=False):
        # n1: running just before the interval's closing finish, i.e. during it
        if (r0, r1) != (q0, q1) or n1 != m1 or (st0, st1) != ("finished", "finished"):
            continue
        if s1 == s0:  # no step between them (the same length): nothing to time
            continue
        out.append((n1, t1 - t0, s1 - s0))
    return out


COLUMNS = ["cell", "batch", "batch_at_most", "intervals", "live_s", "sim_s", "live_over_sim"]


def table(cells: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]]
          ) -> pd.DataFrame:
    """Per cell (in the given order) and batch bucket: intervals, live and simulated
    seconds, their ratio."""
    spans = pd.DataFrame(
        [(i, name, bucket(n), x, y) for i, (name, (live, sim)) in enumerate(cells.items())
         for n, x, y in intervals(live, sim)],
        columns=["order", "cell", "batch_at_most", "live_s", "sim_s"])
    if spans.empty:
        return pd.DataFrame(columns=COLUMNS)
    rows = spans.groupby(["order", "cell", "batch_at_most"]).agg(
        intervals=("live_s", "size"), live_s=("live_s", "sum"), sim_s=("sim_s", "sum"))
    rows = rows.reset_index()
    rows["batch"] = rows["batch_at_most"].map(label)
    rows["live_over_sim"] = rows["live_s"] / rows["sim_s"]
    return rows[COLUMNS]


def overall(rows: pd.DataFrame) -> pd.DataFrame:
    """Summed over cells: the step-time ratio per batch bucket."""
    if rows.empty:
        return rows
    total = rows.groupby("batch_at_most")[["intervals", "live_s", "sim_s"]].sum()
    total["live_over_sim"] = total["live_s"] / total["sim_s"]
    return total.reset_index()
