"""Fault injection for the live runtime's fault tests.

`KillsTheEngine` is a system that submits a few requests and then kills the
engine (its Ray actor, or its engine-core process) mid-rollout. A run that
loses its engine must end with an error, a closed trace, and no process left.
"""

from __future__ import annotations

import asyncio
from typing import Any

from harness.core.runtime import Request


class KillsTheEngine:
    name = "kills-the-engine"

    def __init__(self) -> None:
        self.pids: list[int] = []

    async def run(self, rt: Any) -> None:
        rt.emit("rollout_start", round=0, version=0)
        prompts = rt.workload.take(4)
        futures = [rt.engine.submit(Request(0, i, 0, p, 32)) for i, p in enumerate(prompts)]
        await asyncio.sleep(0.05)
        self.pids = rt.inject_fault("engine")
        rt.emit("decision", what="fault_injected", pids=self.pids)
        for f in futures:
            await f
