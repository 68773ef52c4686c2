"""Stand-ins that tests running a system on a scripted runtime share (tests/test_laminar.py,
tests/test_roll_flash.py): a verifier that rewards every response, a workload of 10-token
prompts numbered from 0, and a runtime's plumbing on asyncio (clock, event log, ids,
tasks, waits). The engines and trainers stay in each test, since each scripts what its
system's rules need."""

from __future__ import annotations

import asyncio
from typing import Any

from harness.core.runtime import Prompt, Response


class ScriptedVerifier:
    async def score(self, response: Response, timeout: float | None = None) -> float:
        return 1.0


class ScriptedWorkload:
    name = "scripted"

    def __init__(self) -> None:
        self.next = 0

    def take(self, n: int) -> list[Prompt]:
        self.next += n
        return [Prompt(i, 10) for i in range(self.next - n, self.next)]


class ScriptedRuntimeBase:
    """A runtime's calls a system makes besides its engine and trainer, on the running
    asyncio loop (a virtual clock in the tests); `events` logs (time, kind, fields)."""

    name = "scripted"

    def __init__(self, cfg: Any) -> None:
        self.config = cfg
        self.verifier = ScriptedVerifier()
        self.workload = ScriptedWorkload()
        self.events: list[tuple[float, str, dict[str, Any]]] = []
        self.ids = 0

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def log(self, ev: str, **fields: Any) -> None:
        self.events.append((self.now(), ev, fields))

    emit = log

    def new_group_id(self) -> int:
        self.ids += 1
        return self.ids - 1

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        return asyncio.get_running_loop().create_task(coro)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def event(self) -> asyncio.Event:
        return asyncio.Event()

    def slots(self, n: int) -> asyncio.Semaphore:
        return asyncio.Semaphore(n)

    async def gather(self, *waits: Any) -> list[Any]:
        return list(await asyncio.gather(*waits))
