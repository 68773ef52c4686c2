"""The tail reading of `validate`: step-time ratios by running batch, by hand."""

from __future__ import annotations

from typing import Any

import pytest

from harness.studies.validate import tail


def trace(admits: int, ends: list[tuple[float, int, str]],
          preempt_at: float | None = None) -> list[dict[str, Any]]:
    """`admits` requests admitted at t=0 (groups 0..n-1, sample 0), then the ends
    (time, group, status) in order, and a preemption at `preempt_at` if given."""
    events: list[dict[str, Any]] = [{"t": 0.0, "ev": "request_admit", "group": g, "sample": 0}
                                    for g in range(admits)]
    for t, g, status in ends:
        if preempt_at is not None and preempt_at < t:
            events.append({"t": preempt_at, "ev": "request_preempt", "group": 9, "sample": 0})
            preempt_at = None
        events.append({"t": t, "ev": "request_finish", "group": g, "sample": 0,
                       "status": status})
    return events


def test_intervals_between_matching_finishes_carry_the_batch_that_ran() -> None:
    live = trace(3, [(1.0, 0, "finished"), (3.0, 1, "finished"), (7.0, 2, "finished")])
    sim = trace(3, [(1.0, 0, "finished"), (2.0, 1, "finished"), (4.0, 2, "finished")])
    # (1, 3]: requests 1 and 2 run; (3, 7]: request 2 alone.
    assert tail.intervals(live, sim) == [(2, 2.0, 1.0), (1, 4.0, 2.0)]
    rows = tail.table({"c": (live, sim)})
    assert rows["batch_at_most"].tolist() == [1, 2]
    assert [tail.label(b) for b in (1, 2, 4, 8, 128)] == ["1", "2", "3-4", "5-8", "65-128"]
    assert rows["live_over_sim"].tolist() == [2.0, 2.0]
    both = tail.overall(tail.table({"a": (live, sim), "b": (sim, sim)}))
    assert both.set_index("batch_at_most")["live_over_sim"].to_dict() == {
        1: pytest.approx(6 / 4), 2: pytest.approx(3 / 2)}


def test_other_orders_aborts_and_preemptions_are_left_out() -> None:
    sim = trace(3, [(1.0, 0, "finished"), (2.0, 1, "finished"), (4.0, 2, "finished")])
    swapped = trace(3, [(1.0, 0, "finished"), (2.0, 2, "finished"), (4.0, 1, "finished")])
    assert tail.intervals(swapped, sim) == []
    aborted = trace(3, [(1.0, 0, "finished"), (2.0, 1, "aborted"), (4.0, 2, "finished")])
    assert tail.intervals(aborted, aborted) == []  # an abort is no step boundary to compare
    preempted = trace(3, [(1.0, 0, "finished"), (2.0, 1, "finished"), (4.0, 2, "finished")],
                      preempt_at=1.5)
    assert tail.intervals(preempted, preempted) == []  # reading stops at the preemption
    assert tail.table({"c": ([], [])}).empty
    same_step = trace(3, [(1.0, 0, "finished"), (1.0, 1, "finished"), (4.0, 2, "finished")])
    assert tail.intervals(same_step, same_step) == [(1, 3.0, 3.0)]  # (1, 1]: no step


@pytest.mark.parametrize(("batch", "row"), [(1, 1), (2, 2), (3, 4), (128, 128), (129, 256),
                                            (10**6, 1024)])
def test_bucket_is_the_next_power_of_two(batch: int, row: int) -> None:
    assert tail.bucket(batch) == row
