"""CGP with RollPacker's tail batching: a combination neither paper tried.

The rollout is RollPacker's (`systems.rollpacker`): a short round launches
ceil(eta x P0) prompts with ceil(eta x R0) responses each, keeps each prompt's
first R0 responses and the first P0 prompts done, and aborts the rest, whose
prompts wait in the long-prompt queue for a long round (P0 of them, without
speculation; they restart from scratch). The reward scheduler and the
parallelism planner are RollPacker's too. The hand-off is CGP's (`systems.cgp`)
instead of RollPacker's stream trainer and after-rollout update: each of the P0
kept groups joins a ready FIFO the moment it is materialised, and U of them
leave for the trainer as soon as U are there, while the rollout goes on, each
batch with its own optimizer step. Weights stay fixed for the round and are
published once its P0/U steps are done, so training stays on-policy.

Rewards are always computed as responses finish (a group must be scored to be
handed off, as in CGP); `rollpacker_reward_scheduler` then only switches the
adaptive sandbox timeout. `rollpacker_stream_trainer` is ignored: the trainer
has its own GPUs and already trains during the rollout.

The question it asks: tail batching shortens the rollout by leaving the long
tail for later, CGP hides the trainer behind the rollout; do the two add up?
"""

from __future__ import annotations

from typing import Any

from harness.core.runtime import Group, Queue, Runtime
from systems.rollpacker import RollPacker


class CGPTail(RollPacker):
    name = "cgp-tail"
    summary = "RollPacker's tail batching (speculative short, then long rounds), CGP's hand-off"
    knobs = tuple(k for k in RollPacker.knobs  # no stream trainer: see above
                  if k not in ("rollpacker_stream_trainer", "rollpacker_stream_at"))

    handoff: Queue[Group]  # the round's materialised groups, in order (set by `run`)

    def staleness_bound(self, cfg: Any) -> int | None:
        """P0/U - 1 steps: CGP's round on fixed weights; aborted prompts restart."""
        return cfg.groups // cfg.update_groups - 1

    def _rewards_as_responses_finish(self, rt: Runtime) -> bool:
        return True

    def _streams(self, rt: Runtime) -> bool:
        return False

    def _ready(self, rt: Runtime, group: Group) -> None:
        self.handoff.put_nowait(group)

    async def run(self, rt: Runtime) -> None:
        cfg = rt.config
        for rnd in range(cfg.rounds):
            await self._plan_parallelism(rt)
            rt.emit("rollout_start", round=rnd, version=rt.engine.version)
            self.handoff = rt.queue()
            rollout = rt.spawn(self._rollout(rt, rnd))
            for _ in range(cfg.groups // cfg.update_groups):
                batch = [await self.handoff.get() for _ in range(cfg.update_groups)]
                await self.batches.train(rt, batch)
            await rollout
            await rt.trainer.publish()
