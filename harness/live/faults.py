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
- the kill itself is one `ray.kill` (or SIGKILL); `ray.kill` only asks Ray to kill the
  actor, so the system then waits, bounded, until the engine is dead (an actor call
  fails, or the processes are gone): a request sent in that gap once reached the
  still-live actor and finished (CI, 2026-11-26);
- after that one more request is submitted and awaited: a dead engine can only
  fail it, so the run ends with an error even where the first requests had already
  finished when the kill came (a fast engine, a slow control node). The run's end
  may still record it as `aborted` (the runtime closes what is in flight), never as
  `finished`.
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


async def until_dead(rt: Any, within_s: float) -> None:
    """Return once a killed Ray engine actor can no longer answer (a call to it fails).

    A local engine needs no wait: SIGKILL cannot be caught, and its target runs no more
    of its own code once `os.kill` has returned (a zombie, not yet reaped, serves
    nothing)."""
    actor = getattr(rt.engine.backend, "actor", None)
    if actor is None:
        return
    try:
        async with asyncio.timeout(within_s):
            while True:
                try:
                    await actor.pids.remote()
                except Exception:  # ActorDiedError and kin: the kill has landed
                    return
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise RuntimeError(f"the engine survived its fault: its actor still answers "
                           f"{within_s:g} s after ray.kill") from None


class KillsTheEngine:
    name = "kills-the-engine"
    requests = 4
    max_tokens = 32
    dies_within_s = 60.0  # a loaded machine reaps slowly; past it, the kill failed

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
        await until_dead(rt, self.dies_within_s)
        after = rt.engine.submit(Request(0, self.requests, 0, prompts[-1], self.max_tokens))
        for f in [*futures, after]:
            await f
        raise RuntimeError("the engine survived its fault: every request finished")
