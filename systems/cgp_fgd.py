"""RolloutPipe's CGP plus frontier-group dispatch (FGD).

Admission control in front of the engine: at most F_w groups are in service;
the others are deferred. Whenever a group becomes serving-complete (all K
responses done) it leaves the frontier and the lowest-order deferred group is
admitted, so capacity concentrates on the groups that form the next batch.
"""

from __future__ import annotations

import asyncio

from harness.core.runtime import Group, Runtime
from systems.cgp import CGP
from systems.common import serve


class CGPFGD(CGP):
    name = "cgp-fgd"
    summary = "CGP with frontier admission: at most F_w groups in service, lowest order first"
    knobs = (*CGP.knobs, "frontier")

    async def admit(self, rt: Runtime, groups: list[Group], ready: asyncio.Queue[Group]) -> None:
        slots = asyncio.Semaphore(rt.config.frontier)

        async def serve_and_hand_off(group: Group) -> None:
            done = await serve(rt, group, on_complete=lambda _g: slots.release())
            ready.put_nowait(done)

        tasks = []
        for group in groups:  # submission order is the group order
            await slots.acquire()
            rt.emit("decision", what="frontier_admit", group=group.id)
            tasks.append(rt.spawn(serve_and_hand_off(group)))
        for task in tasks:
            await task
