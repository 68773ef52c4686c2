"""The waiting tools on the simulator's coroutine driver (harness/sim/waits.py) against
asyncio's: one system that uses every tool runs on the live runtime's tools (asyncio's,
`RunnerBase`'s, on a loop whose clock jumps), on the driver and on the simulated runtime,
and logs the same things at the same virtual times, in the same order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.core.config import RunConfig
from harness.shared.runner import RunnerBase
from harness.sim.co import Driver
from harness.sim.heap import Heap
from harness.sim.runtime import SimRuntime
from harness.sim.waits import Queue, QueueEmpty, tools
from tests.clocks import VirtualAsyncio


class _Everything:
    name = "everything"

    async def run(self, rt: Any) -> None:
        log = self.log = []
        flag, fifo, pool = rt.event(), rt.queue(), rt.slots(2)

        def say(what: str) -> None:
            log.append((what, rt.now()))

        async def holder(name: str, hold: float) -> str:
            async with pool:
                say(f"{name} holds")
                await rt.sleep(hold)
            return name

        async def setter() -> None:
            await rt.sleep(3.0)
            flag.set()
            fifo.put_nowait("x")
            fifo.put_nowait("y")
            say("set")

        async def getter(name: str) -> None:
            say(f"{name} got {await fifo.get()}")

        async def broken() -> None:
            await rt.sleep(0.5)
            raise ValueError("one part broke")

        say(f"gathered {await rt.gather(holder('a', 1.0), holder('b', 2.0), holder('c', 4.0))}")
        try:
            await rt.gather(rt.sleep(1.0), broken())
        except ValueError as err:
            say(f"gather raised {err}")
        getters = [rt.spawn(getter("g1")), rt.spawn(getter("g2"))]
        rt.spawn(setter())
        slow = rt.spawn(rt.sleep(10.0))
        say(f"timed out with {len(await rt.first([slow], timeout=1.0))} done")
        wake = rt.spawn(flag.wait())
        done = await rt.first([slow, wake], timeout=30.0)
        say(f"first: the flag {wake in done}, the sleep {slow in done}")
        wake.cancel()
        slow.cancel()
        for g in getters:
            await g
        flag.clear()
        late = rt.spawn(flag.wait())
        await rt.sleep(0)
        say(f"cleared flag: waiter done {late.done()}, queue empty {fifo.empty()}")
        late.cancel()
        await rt.sleep(0)
        say(f"cancelled waiter: {late.cancelled()}")


def _on_asyncio() -> list[tuple[str, float]]:
    """The tools as the live runtime has them (RunnerBase's, on asyncio)."""
    loop = VirtualAsyncio()
    runner = RunnerBase.__new__(RunnerBase)  # the tools only: no trace, no run
    runner._loop = loop
    runner._spawned, runner._failure = set(), None
    runner.now = loop.time  # type: ignore[method-assign]
    system = _Everything()
    try:
        loop.run_until_complete(system.run(runner))
    finally:
        loop.close()
    return system.log


def _on_sim(tmp_path: Path) -> list[tuple[str, float]]:
    system = _Everything()
    SimRuntime(RunConfig(workload="sci-jl").validate(), tmp_path / "t.jsonl").run(system)
    return system.log


def _on_driver() -> list[tuple[str, float]]:
    driver = Driver(Heap())

    class Rt:
        now = driver.heap.time

    rt = Rt()
    for name, call in tools(driver).items():
        setattr(rt, name, call)
    system = _Everything()
    driver.run(system.run(rt))
    return system.log


def test_the_driver_waits_as_asyncio_does(tmp_path: Path) -> None:
    """The same log at the same times; within the instant 8.5 s the one order differs:
    asyncio wakes main through a Task awaiting the flag and then asyncio.wait's
    callback, two turns after the getters; the driver wakes each in the order the
    wakes were scheduled: main's (the flag's wait, set first), then g1's, g2's."""
    head = [("a holds", 0.0), ("b holds", 0.0), ("c holds", 1.0),
            ("gathered ['a', 'b', 'c']", 5.0), ("gather raised one part broke", 5.5),
            ("timed out with 0 done", 6.5), ("set", 8.5)]
    tail = [("cleared flag: waiter done False, queue empty True", 8.5),
            ("cancelled waiter: True", 8.5)]
    first = ("first: the flag True, the sleep False", 8.5)
    gets = [("g1 got x", 8.5), ("g2 got y", 8.5)]
    assert _on_asyncio() == head + gets + [first] + tail
    assert _on_driver() == head + [first] + gets + tail
    assert _on_sim(tmp_path) == head + [first] + gets + tail  # the simulator is the driver


def test_an_empty_queue_says_so() -> None:
    with pytest.raises(QueueEmpty):
        Queue().get_nowait()
