"""The waiting tools on the simulator's coroutine driver (harness/sim/waits.py) against
asyncio's: one system that uses every tool runs on the simulated runtime of today
(asyncio on the virtual loop) and on the driver, and logs the same things at the same
virtual times, in the same order."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.config import RunConfig
from harness.sim.co import Driver
from harness.sim.heap import Heap
from harness.sim.runtime import SimRuntime
from harness.sim.waits import Queue, QueueEmpty, tools
from tests.toy_systems import FIRST, GETS, HEAD, ON_ASYNCIO, TAIL, Waits


def _on_asyncio(tmp_path: Path) -> list[tuple[str, float]]:
    system = Waits()
    SimRuntime(RunConfig(workload="sci-jl").validate(), tmp_path / "t.jsonl").run(system)
    return system.log


def _on_driver() -> list[tuple[str, float]]:
    driver = Driver(Heap())

    class Rt:
        now = driver.heap.time

    rt = Rt()
    for name, call in tools(driver).items():
        setattr(rt, name, call)
    system = Waits()
    driver.run(system.run(rt))
    return system.log


def test_the_driver_waits_as_asyncio_does(tmp_path: Path) -> None:
    """The same log at the same times; within the instant 8.5 s the one order differs:
    asyncio wakes main through a Task awaiting the flag and then asyncio.wait's
    callback, two turns after the getters; the driver wakes each in the order the
    wakes were scheduled: main's (the flag's wait, set first), then g1's, g2's."""
    assert _on_asyncio(tmp_path) == ON_ASYNCIO
    assert _on_driver() == HEAD + [FIRST] + GETS + TAIL


def test_an_empty_queue_says_so() -> None:
    with pytest.raises(QueueEmpty):
        Queue().get_nowait()
