"""Fault injection for the live runtime's fault tests.

`KillsTheEngine` is a system that submits a few requests and then kills the
engine (its Ray actor, or its engine-core process) mid-rollout. A run that
loses its engine must end with an error, a closed trace, and no process left.

It is written so that nothing in it depends on how busy the machine is (the Ray test
once failed at load 4 with no `fault_injected` in its trace):
- the engine's process ids are read with an await, so the control node's loop keeps
  serving the requests' streams meanwhile (a blocking `ray.get` there stalls them);
- `fault_injected` is written (one flushed trace line) before the kill, so a run that
  fails at once still has it, and whatever fails afterwards is after the fault;
- the kill itself is one `ray.kill` (or SIGKILL), no further call to the engine;
- after the kill one more request is submitted and awaited: a dead engine can only
  fail it, so the run ends with an error even where the first requests had already
  finished when the kill came (a fast engine, a slow control node).
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

from harness.core.runtime import Request


async def engine_pids(rt: Any) -> list[int]:
    """The engine's process ids: its Ray actor and engine core, or the local engine
    core's processes."""
    backend = rt.engine.backend
    actor = getattr(backend, "actor", None)
    if actor is not None:
        return list(await actor.pids.remote())
    return list(backend.engine_pids())


def kill_engine(rt: Any, pids: list[int]) -> None:
    """Kill the engine whose processes are `pids`, without calling it again."""
    actor = getattr(rt.engine.backend, "actor", None)
    if actor is not None:
        import ray

        ray.kill(actor)
        return
    for pid in pids:
        os.kill(pid, signal.SIGKILL)


class KillsTheEngine:
    name = "kills-the-engine"
    requests = 4
    max_tokens = 32

    def __init__(self) -> None:
        self.pids: list[int] = []

    async def run(self, rt: Any) -> None:
        rt.emit("rollout_start", round=0, version=0)
        prompts = rt.workload.take(self.requests + 1)
        futures = [rt.engine.submit(Request(0, i, 0, p, self.max_tokens))
                   for i, p in enumerate(prompts[:-1])]
        await asyncio.sleep(0.05)  # usually mid-rollout; nothing below depends on it
        self.pids = await engine_pids(rt)
        rt.emit("decision", what="fault_injected", pids=self.pids)
        kill_engine(rt, self.pids)
        after = rt.engine.submit(Request(0, self.requests, 0, prompts[-1], self.max_tokens))
        for f in [*futures, after]:
            await f
        raise RuntimeError("the engine survived its fault: every request finished")
