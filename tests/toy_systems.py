"""Toy systems shared by tests: `Waits` uses every waiting tool of the contract
(`sleep`, `event`, `queue`, `slots`, `first`, `gather`, `spawn`) and logs what it sees
with the virtual time, so one toy checks both the simulated runtime
(tests/test_runtime_calls.py) and the coroutine driver (tests/test_sim_waits.py).

Times are exact: the virtual clock moves only by what the system waits, and each time in
the logs below is the sum of the sleeps that lead to it."""

from __future__ import annotations

from typing import Any

# three holders on two slots: c waits for a (1 s) and holds 4 s, so the gather ends at 5 s;
# the failing gather raises at 5 + 0.5; `first` times out 1 s later; the setter, spawned
# at 5.5 s, sets the flag and queues "x" and "y" at 5.5 + 3 = 8.5 s
HEAD = [("a holds", 0.0), ("b holds", 0.0), ("c holds", 1.0),
        ("gathered ['a', 'b', 'c']", 5.0), ("gather raised one part broke", 5.5),
        ("timed out with 0 done", 6.5), ("set", 8.5)]
GETS = [("g1 got x", 8.5), ("g2 got y", 8.5)]
FIRST = ("first: the flag True, the sleep False", 8.5)
TAIL = [("cleared flag: waiter done False, queue empty True", 8.5),
        ("cancelled waiter: True", 8.5)]
# asyncio wakes the main task through a Task awaiting the flag and then asyncio.wait's
# callback, two turns after the getters
ON_ASYNCIO = HEAD + GETS + [FIRST] + TAIL
# the simulator's driver wakes each in the order the wakes were scheduled: main's (the
# flag's wait, set first), then g1's and g2's
ON_DRIVER = HEAD + [FIRST] + GETS + TAIL


class Waits:
    """Every waiting tool once; `log` holds (what, virtual time) in the order seen."""

    name = "waits"

    async def run(self, rt: Any) -> None:
        log: list[tuple[str, float]] = []
        self.log = log
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
