"""Slime's synchronous baseline: rollout, then train.

All R x K requests go to the engine at once (request-level FIFO admission).
Every group is handed to the trainer only when the whole rollout is complete,
which is then consumed as R/U logical updates of U groups each; the weights are
published after the round.
"""

from __future__ import annotations

from typing import Any

from harness.core.runtime import Group, Runtime
from systems.common import BatchCounter, new_groups


class Slime:
    name = "slime"
    summary = "synchronous baseline: the trainer starts when the whole rollout is done"
    knobs: tuple[str, ...] = ("update_groups",)  # read beyond the shared fields

    def __init__(self) -> None:
        self.batches = BatchCounter()

    def staleness_bound(self, cfg: Any) -> int | None:
        """R/U - 1 steps: every group is generated on the round's weights, and the
        round's last batch is trained after R/U - 1 of its own steps."""
        return cfg.groups // cfg.update_groups - 1

    async def rollout(self, rt: Runtime, groups: list[Group]) -> None:
        """Generate and materialise every group (rewards as each sample finishes)."""
        await rt.gather(*(rt.serve(g) for g in groups))

    async def run(self, rt: Runtime) -> None:
        cfg = rt.config
        for rnd in range(cfg.rounds):
            rt.emit("rollout_start", round=rnd, version=rt.engine.version)
            groups = new_groups(rt, rnd, rt.workload.take(cfg.groups))
            await self.rollout(rt, groups)
            rt.emit("rollout_complete", round=rnd)
            for i in range(0, len(groups), cfg.update_groups):
                await self.batches.train(rt, groups[i : i + cfg.update_groups])
            await rt.trainer.publish()
