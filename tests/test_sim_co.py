"""The simulator's coroutine driver (harness/sim/co.py), alone on a heap: the order it
runs coroutines in, cancellation, a failing coroutine failing the run, a deadlock, an
asyncio object awaited by mistake, and Ctrl-C ending a trace with run_end "interrupted".
Every time below is the sum of the sleeps that lead to it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest

from harness.core.trace import TraceWriter
from harness.sim.co import Cancelled, Driver, Wait
from harness.sim.heap import Heap


def _driver() -> Driver:
    return Driver(Heap())


def test_spawn_runs_after_the_caller_and_sleeps_wake_in_order() -> None:
    co, seen = _driver(), []

    async def sleeper(name: str, seconds: float) -> str:
        seen.append(f"{name} starts at {co.heap.time()}")
        await co.sleep(seconds)
        seen.append(f"{name} wakes at {co.heap.time()}")
        return name

    async def main() -> list[str]:
        a = co.spawn(sleeper("a", 2.0))
        b = co.spawn(sleeper("b", 1.0))
        c = co.spawn(sleeper("c", 2.0))  # wakes at a's time, after a
        seen.append("main goes on")
        return [await a, await b, await c]

    assert co.run(main()) == ["a", "b", "c"]
    assert seen == ["main goes on", "a starts at 0.0", "b starts at 0.0", "c starts at 0.0",
                    "b wakes at 1.0", "a wakes at 2.0", "c wakes at 2.0"]
    assert co.live == {}


def test_a_wait_resumes_its_waiters_after_the_setter_in_the_order_they_parked() -> None:
    co, seen, gate = _driver(), [], Wait()

    async def waiter(name: str) -> None:
        value = await gate
        seen.append((name, value, co.heap.time()))

    async def main() -> None:
        procs = [co.spawn(waiter(n)) for n in ("x", "y")]
        await co.sleep(3.0)
        gate.set_result(7)
        seen.append("set")
        for proc in procs:
            await proc

    co.run(main())
    assert seen == ["set", ("x", 7, 3.0), ("y", 7, 3.0)]  # main runs on to its await first


def test_cancel_raises_at_the_await_and_cancels_what_it_awaits() -> None:
    co, seen = _driver(), []

    async def parked() -> None:
        try:
            await co.sleep(10.0)
        except Cancelled:
            seen.append(("parked cancelled at", co.heap.time()))
            raise
        finally:
            seen.append("parked finally")

    async def never_started() -> None:
        seen.append("never")

    async def cancels_itself(proc: list) -> None:  # type: ignore[type-arg]
        proc[0].cancel()  # while it runs: raised at its next await
        seen.append("still running")
        await co.sleep(1.0)
        seen.append("not reached")

    async def main() -> None:
        p = co.spawn(parked())
        q = co.spawn(never_started())
        q.cancel()  # before its first step: the body never runs
        me: list = []  # type: ignore[type-arg]
        me.append(co.spawn(cancels_itself(me)))
        await co.sleep(2.0)
        assert p.cancel()
        await co.sleep(0)  # it raises at its await on its next turn, as on asyncio
        assert p.cancelled() and q.cancelled() and me[0].cancelled()
        with pytest.raises(Cancelled):
            p.result()
        seen.append(("main ends at", co.heap.time()))

    co.run(main())
    assert seen == ["still running", ("parked cancelled at", 2.0), "parked finally",
                    ("main ends at", 2.0)]
    assert co.heap.time() == 2.0  # the cancelled sleep of 10 s never moved the clock


def test_a_failing_coroutine_fails_the_run_inside_main() -> None:
    co, seen = _driver(), []

    async def boom() -> None:
        await co.sleep(1.0)
        raise RuntimeError("worker broke")

    async def bystander() -> None:
        try:
            await co.sleep(50.0)
        finally:
            seen.append(("bystander ends at", co.heap.time()))

    async def main() -> None:
        co.spawn(boom())  # not awaited: its failure still fails the run
        co.spawn(bystander())
        try:
            await co.sleep(100.0)
        except RuntimeError as err:
            seen.append((f"main sees: {err}", co.heap.time()))
            raise

    with pytest.raises(RuntimeError, match="worker broke"):
        co.run(main())
    assert seen == [("main sees: worker broke", 1.0), ("bystander ends at", 1.0)]
    assert co.live == {}


def test_a_spawned_gather_that_fails_fails_the_run_not_a_deadlock() -> None:
    """`rt.spawn(rt.gather(...))` (a Wait on the simulator, a coroutine made a task on
    asyncio): a part's error is the run's, raised inside main at its await, where it
    was lost before and main, waiting for what the failed part would have made, was
    ended as a deadlock (a new user's system; the live runtime fails the run)."""
    from harness.sim.waits import Queue, gather

    co, seen = _driver(), []

    async def part(i: int, out: Queue) -> None:
        await co.sleep(1.0 + i)
        if i == 1:
            raise KeyError("inner boom")
        out.put_nowait(i)

    async def main() -> None:
        out: Queue = Queue()
        co.spawn(gather(co, *(part(i, out) for i in range(3))))
        try:
            for _ in range(3):
                seen.append(await out.get())
        except KeyError as err:
            seen.append((f"main sees: {err}", co.heap.time()))
            raise

    with pytest.raises(KeyError, match="inner boom"):
        co.run(main())
    assert seen == [0, ("main sees: 'inner boom'", 2.0)]

    async def cancelled() -> None:  # a spawned Wait cancelled is no failure
        wait = Wait()
        co.spawn(wait)
        wait.cancel()
        await co.sleep(1.0)
        seen.append("main ends")

    co.run(cancelled())
    assert seen[-1] == "main ends"


def test_a_deadlock_and_an_asyncio_await_each_end_the_run_with_one_line() -> None:
    async def stuck() -> None:
        await Wait()  # nobody will set it

    with pytest.raises(RuntimeError, match="simulation deadlock"):
        _driver().run(stuck())

    async def mistaken() -> None:
        await asyncio.sleep(0)  # asyncio's own: not on this driver

    with pytest.raises(RuntimeError, match="awaited NoneType on the simulator"):
        _driver().run(mistaken())

    async def slept() -> None:
        await asyncio.sleep(1.0)  # asks asyncio for its loop: there is none

    with pytest.raises(RuntimeError, match="not asyncio's"):
        _driver().run(slept())


def test_ctrl_c_ends_the_trace_with_run_end_interrupted(tmp_path: Path) -> None:
    co, seen = _driver(), []
    path = tmp_path / "trace.jsonl"
    writer = TraceWriter(path, co.heap.time)

    async def worker() -> None:
        try:
            await co.sleep(60.0)
        finally:
            seen.append("worker cleaned up")

    async def run_async() -> None:  # the shape of RunnerBase.run_async
        writer.emit("run_start")
        try:
            co.spawn(worker())
            co.heap.call_at(2.0, os.kill, os.getpid(), signal.SIGINT)  # Ctrl-C at 2 s
            await co.sleep(100.0)
        except asyncio.CancelledError:
            writer.emit("run_end", error="interrupted")
            writer.close()
            raise
        writer.emit("run_end")
        writer.close()

    with pytest.raises(KeyboardInterrupt):
        co.run(run_async())
    events = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["ev"] for e in events] == ["run_start", "run_end"]
    assert events[-1]["error"] == "interrupted" and events[-1]["t"] == 2.0
    assert seen == ["worker cleaned up"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
