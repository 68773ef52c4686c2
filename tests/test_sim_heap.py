"""The simulator's heap of plain callbacks (harness/sim/heap.py), alone: order by time,
then by scheduling; cancel in place; stop and run again."""

from __future__ import annotations

import pytest

from harness.sim.heap import Heap, cancel, cancelled


def test_time_then_scheduling_order() -> None:
    heap, seen = Heap(), []
    heap.call_at(2.0, seen.append, "b@2")
    heap.call_at(1.0, seen.append, "a@1")
    heap.call_at(2.0, seen.append, "c@2")  # same time as b, scheduled after it
    heap.call_soon(seen.append, "now")
    heap.run()
    assert seen == ["now", "a@1", "b@2", "c@2"]
    assert heap.time() == 2.0 and heap.pending() == 0


def test_callbacks_scheduled_now_run_after_those_already_due() -> None:
    heap, seen = Heap(), []

    def first() -> None:
        seen.append(("first", heap.time()))
        heap.call_soon(seen.append, ("soon", heap.time()))
        heap.call_later(0.5, seen.append, ("later", 1.5))
        heap.call_at(0.0, seen.append, ("past is now", heap.time()))

    heap.call_at(1.0, first)
    heap.call_at(1.0, seen.append, ("second", 1.0))
    heap.run()
    assert seen == [("first", 1.0), ("second", 1.0), ("soon", 1.0), ("past is now", 1.0),
                    ("later", 1.5)]


def test_cancel_skips_the_entry_and_keeps_the_clock() -> None:
    heap, seen = Heap(), []
    late = heap.call_at(5.0, seen.append, "late")
    heap.call_at(1.0, seen.append, "early")
    heap.call_at(0.5, cancel, late)
    heap.run()
    assert seen == ["early"] and cancelled(late)
    assert heap.time() == 1.0  # a cancelled entry does not move the clock


def test_stop_leaves_the_rest_and_an_error_leaves_at_once() -> None:
    heap, seen = Heap(), []
    heap.call_at(1.0, heap.stop)
    heap.call_at(2.0, seen.append, 2)

    def boom() -> None:
        raise ValueError("callback broke")

    heap.call_at(3.0, boom)
    heap.call_at(4.0, seen.append, 4)
    heap.run()
    assert seen == [] and heap.time() == 1.0
    with pytest.raises(ValueError, match="callback broke"):
        heap.run()
    assert seen == [2] and heap.time() == 3.0
    heap.run()
    assert seen == [2, 4]
