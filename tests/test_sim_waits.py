"""The waiting tools on the simulator's coroutine driver (harness/sim/waits.py) against
asyncio's: one system that uses every tool (tests/toy_systems.py's `Waits`) runs on the
live runtime's tools (asyncio's, `RunnerBase`'s, on a loop whose clock jumps), on the
and on the driver, and logs the same things at the same virtual times;
only the order within one instant differs between asyncio and the driver."""

from __future__ import annotations

import pytest

from harness.shared.runner import RunnerBase
from harness.sim.co import Driver
from harness.sim.heap import Heap
from harness.sim.waits import Queue, QueueEmpty, tools
from tests.clocks import VirtualAsyncio
from tests.toy_systems import ON_ASYNCIO, ON_DRIVER, Waits


def _on_asyncio() -> list[tuple[str, float]]:
    """The tools as the live runtime has them (RunnerBase's, on asyncio)."""
    loop = VirtualAsyncio()
    runner = RunnerBase.__new__(RunnerBase)  # the tools only: no trace, no run
    runner._loop = loop
    runner._spawned, runner._failure = set(), None
    runner.now = loop.time  # type: ignore[method-assign]
    system = Waits()
    try:
        loop.run_until_complete(system.run(runner))
    finally:
        loop.close()
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


def test_the_driver_waits_as_asyncio_does() -> None:
    """The same log at the same times; within the instant 8.5 s the one order differs:
    asyncio wakes main through a Task awaiting the flag and then asyncio.wait's
    callback, two turns after the getters; the driver wakes each in the order the
    wakes were scheduled: main's (the flag's wait, set first), then g1's, g2's."""
    assert _on_asyncio() == ON_ASYNCIO
    assert _on_driver() == ON_DRIVER  # and the simulated runtime: tests/test_runtime_calls.py


def test_an_empty_queue_says_so() -> None:
    with pytest.raises(QueueEmpty):
        Queue().get_nowait()
