"""CGP with APRIL's active partial rollouts: a combination neither paper tried.

The rollout is APRIL's (`systems.april`): `over_sampling_groups` groups in
flight, the round stops once R of them are complete, and the unfinished rest
is aborted and, with `partial_rollout`, resumed first in the next round. The
hand-off is CGP's (`systems.cgp`): each of those R groups joins a ready FIFO
the moment it is materialised, and U of them leave for the trainer as soon as
U are there, while the rollout goes on. Weights stay fixed for the round and
are published once its R/U optimizer steps are done; only carried-over tokens
are off-policy, as in APRIL.

The question it asks: APRIL cuts the long tail of the rollout, CGP hides the
trainer behind the rollout; do the two savings add up?
"""

from __future__ import annotations

from typing import Any

from harness.core.runtime import Group, Queue, Runtime
from systems.april import APRIL
from systems.common import emit_when_done


class CGPAPRIL(APRIL):
    name = "cgp-april"
    summary = "APRIL's over-sampling and carry-over, with CGP's U-group hand-off to the trainer"
    knobs = (*APRIL.knobs, "update_groups")

    handoff: Queue[Group]  # the round's materialised groups, in order (set by `run`)

    def staleness_bound(self, cfg: Any) -> int | None:
        """With partial rollout none (APRIL's carry-over). Without it R/U steps: a
        round's groups lag at most R/U - 1, and a spare is trained first next round."""
        return None if cfg.partial_rollout else cfg.groups // cfg.update_groups

    def _ready(self, rt: Runtime, group: Group) -> None:
        self.handoff.put_nowait(group)

    async def run(self, rt: Runtime) -> None:
        cfg = rt.config
        for rnd in range(cfg.rounds):
            rt.emit("rollout_start", round=rnd, version=rt.engine.version)
            self.handoff = rt.queue()
            rollout = rt.spawn(self._rollout(rt, rnd))
            emit_when_done(rt, rollout, "rollout_complete", round=rnd)
            for _ in range(cfg.groups // cfg.update_groups):
                batch = [await self.handoff.get() for _ in range(cfg.update_groups)]
                await self.batches.train(rt, batch)
            await rollout
            await rt.trainer.publish()
