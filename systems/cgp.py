"""RolloutPipe's complete-group pipelining (CGP).

Each group joins a ready FIFO the moment it is materialised; a logical batch of
U groups leaves the FIFO for the trainer as soon as U are there, while later
groups are still being generated. Weights stay fixed for the round and are
published only after all R groups are consumed, so training stays on-policy.
Admission is the engine's default (all requests submitted at once).
"""

from __future__ import annotations

from typing import Any

from harness.core.runtime import Group, Queue, Runtime
from systems.common import BatchCounter, emit_when_done, new_groups


class CGP:
    name = "cgp"
    summary = "complete-group pipelining: train on U materialised groups while the rollout runs"
    knobs: tuple[str, ...] = ("update_groups",)  # read beyond the shared fields

    def __init__(self) -> None:
        self.batches = BatchCounter()

    def staleness_bound(self, cfg: Any) -> int | None:
        """R/U - 1 steps: weights stay fixed for the round, which takes R/U steps."""
        return cfg.groups // cfg.update_groups - 1

    async def admit(self, rt: Runtime, groups: list[Group], ready: Queue[Group],
                    ranked: bool = False) -> None:
        """Submit every group at once; each joins the ready FIFO when materialised.
        `ranked`: each group's requests carry its order as their priority (the engine
        admits lower values first), CGP+FGD's priority reading."""

        async def serve_and_hand_off(group: Group, order: int) -> None:
            ready.put_nowait(await rt.serve(group, priority=order if ranked else 0))

        await rt.gather(*(serve_and_hand_off(g, order) for order, g in enumerate(groups)))

    async def run(self, rt: Runtime) -> None:
        cfg = rt.config
        for rnd in range(cfg.rounds):
            rt.emit("rollout_start", round=rnd, version=rt.engine.version)
            groups = new_groups(rt, rnd, rt.workload.take(cfg.groups))
            ready: Queue[Group] = rt.queue()
            rollout = rt.spawn(self.admit(rt, groups, ready))
            emit_when_done(rt, rollout, "rollout_complete", round=rnd)
            for _ in range(cfg.groups // cfg.update_groups):
                batch = [await ready.get() for _ in range(cfg.update_groups)]
                await self.batches.train(rt, batch)
            await rollout
            await rt.trainer.publish()
