"""RolloutPipe's CGP plus frontier-group dispatch (FGD), in the paper's two readings.

The paper describes FGD two ways, and `frontier_mode` runs either:

- `cap` (the default): "A request q is admitted into the rollout engine if and only
  if its group belongs to the frontier" (Sec. 3.3, Eq. 6) and "the engine serves at
  most F_w groups at a time" (Sec. 4, Rollout node). At most F_w groups are in
  service; the others are deferred. Whenever a group becomes serving-complete (all K
  responses done) it leaves the frontier and the lowest-order deferred group is
  admitted.
- `priority`: "FGD is a Rollout-node admission policy that prioritizes requests for
  the F_w frontier groups" (Sec. 1, contributions) and "frontier-first admission"
  (Sec. 3, Fig. 3; Sec. 7). Every request is submitted at once, each with its group's
  submission order as its priority, so the engine admits the frontier's requests
  (the F_w lowest-order groups not yet serving-complete) before any other group's.
  Nothing else is capped. On an engine that already admits in arrival order (request
  FIFO, as the paper says "standard SGLang admission" is, Sec. 2) and with every
  group submitted in order, this admits exactly as CGP does: the reading changes
  nothing unless the engine's own order differs from the groups' order.

SGLang's default does not reorder them either, so the simulated SGLang engine keeps
arrival order: slime pins SGLang v0.5.15.post1
(THUDM/slime@624b824a898ab0ec1fcb4d373004c7f3852bf515:docker/Dockerfile:1) and sets no
scheduling policy; SGLang's default is FCFS
(sgl-project/sglang@v0.5.15.post1:python/sglang/srt/server_args.py:678-692), under
which the waiting queue is not sorted (python/sglang/srt/managers/schedule_policy.py:
193-198) and the radix cache's in-batch deprioritising of siblings that share a prompt
never runs (it is for the cache-aware policies only, :200-206, :270-292).
"""

from __future__ import annotations

from harness.core.runtime import Group, Queue, Runtime
from systems.cgp import CGP

FRONTIER_MODES = ("cap", "priority")


class CGPFGD(CGP):
    name = "cgp-fgd"
    summary = ("CGP with frontier admission: at most F_w groups in service (cap) or the "
               "frontier's requests first (priority), lowest order first")
    knobs = (*CGP.knobs, "frontier", "frontier_mode")

    async def admit(self, rt: Runtime, groups: list[Group], ready: Queue[Group]) -> None:
        mode = rt.config.frontier_mode
        if mode == "priority":
            await self.admit_by_priority(rt, groups, ready)
        elif mode == "cap":
            await self.admit_capped(rt, groups, ready)
        else:
            raise ValueError(f"frontier_mode {mode!r}: must be one of {FRONTIER_MODES}")

    async def admit_capped(self, rt: Runtime, groups: list[Group],
                           ready: Queue[Group]) -> None:
        """Eq. 6: a group's requests reach the engine only once it is in the frontier."""
        slots = rt.slots(rt.config.frontier)

        async def serve_and_hand_off(group: Group) -> None:
            done = await rt.serve(group, on_complete=lambda _g: slots.release())
            ready.put_nowait(done)

        tasks = []
        for group in groups:  # submission order is the group order
            await slots.acquire()
            rt.emit("decision", what="frontier_admit", group=group.id)
            tasks.append(rt.spawn(serve_and_hand_off(group)))
        await rt.gather(*tasks)

    async def admit_by_priority(self, rt: Runtime, groups: list[Group],
                                ready: Queue[Group]) -> None:
        """Frontier-first: every request submitted now, ranked by its group's order.

        The engine admits lower priority values first (`Request.priority`), so the
        lowest-order groups still in service (the frontier of Eq. 5) always rank ahead
        of every deferred group, however the frontier moves: no re-ranking is needed."""
        rt.emit("decision", what="frontier_priority", groups=len(groups))
        await super().admit(rt, groups, ready, ranked=True)
