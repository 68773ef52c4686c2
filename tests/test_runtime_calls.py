"""The contract's group call and waiting tools (`rt.serve`, `sleep`, `event`, `queue`,
`slots`, `first`, `gather`): what a system sees of them, on the simulated runtime.

Times are exact: the virtual clock moves only by what the system waits, and each value
below is the sum of the sleeps that lead to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.core.config import RunConfig
from harness.core.trace import read_trace
from harness.sim.runtime import SimRuntime


def _run(system: Any, tmp_path: Path, **fields: Any) -> SimRuntime:
    rt = SimRuntime(RunConfig(workload="sci-jl", **fields).validate(), tmp_path / "t.jsonl")
    rt.run(system)
    return rt


class _Waits:
    name = "waits"

    async def run(self, rt) -> None:  # type: ignore[no-untyped-def]
        self.log: list[tuple[str, float]] = []
        flag, fifo, pool = rt.event(), rt.queue(), rt.slots(2)

        async def holder(name: str, hold: float) -> str:
            async with pool:
                self.log.append((f"{name} in", rt.now()))
                await rt.sleep(hold)
            return name

        async def setter() -> None:
            await rt.sleep(3.0)
            flag.set()
            fifo.put_nowait("x")

        # three holders on two slots: c waits for a (1 s), so it ends at 1 + 4 = 5 s
        self.names = await rt.gather(holder("a", 1.0), holder("b", 2.0), holder("c", 4.0))
        self.after_gather = rt.now()
        rt.spawn(setter())  # at 5 s: sets the flag and queues "x" at 8 s
        slow = rt.spawn(rt.sleep(10.0))
        self.timed_out = await rt.first([slow], timeout=1.0)  # nothing done at 6 s
        self.at_timeout = rt.now()
        waiter = rt.spawn(flag.wait())
        done = await rt.first([slow, waiter])
        self.first_done = (done == {waiter}, rt.now())
        self.got = (await fifo.get(), fifo.empty(), rt.now())


def test_waiting_tools_keep_virtual_time(tmp_path: Path) -> None:
    system = _Waits()
    _run(system, tmp_path)
    assert system.log == [("a in", 0.0), ("b in", 0.0), ("c in", 1.0)]
    assert system.names == ["a", "b", "c"]
    assert system.after_gather == 5.0
    assert system.timed_out == set() and system.at_timeout == 6.0
    assert system.first_done == (True, 8.0)
    assert system.got == ("x", True, 8.0)


class _OneGroup:
    name = "one-group"

    async def run(self, rt) -> None:  # type: ignore[no-untyped-def]
        from harness.core.runtime import Group

        (prompt,) = rt.workload.take(1)
        self.told: list[int] = []
        self.completed: list[int] = []
        group = Group(rt.new_group_id(), 0, prompt)
        self.group = await rt.serve(group, on_response=lambda r: self.told.append(
            r.request.sample), on_complete=lambda g: self.completed.append(g.id))


def test_serve_generates_scores_and_materialises_the_group(tmp_path: Path) -> None:
    system = _OneGroup()
    rt = _run(system, tmp_path, group_size=4)
    group = system.group
    assert [r.request.sample for r in group.responses] == [0, 1, 2, 3]
    assert all(r.status == "finished" for r in group.responses)
    assert len(group.rewards) == 4 and len(group.advantages) == 4
    assert sorted(system.told) == [0, 1, 2, 3] and system.completed == [0]
    events = read_trace(tmp_path / "t.jsonl")
    kinds = [e["ev"] for e in events]
    assert kinds.count("request_finish") == 4
    # group_complete once every sample has left the engine; materialised after it
    last_finish = max(e["t"] for e in events if e["ev"] == "request_finish")
    (complete,) = [e for e in events if e["ev"] == "group_complete"]
    (made,) = [e for e in events if e["ev"] == "group_materialized"]
    assert complete["t"] == last_finish and made["t"] >= complete["t"]
    assert made["samples"] == [0, 1, 2, 3] and made["rewards"] == group.rewards
    assert rt.engine.load().running == 0
