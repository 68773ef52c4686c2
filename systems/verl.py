"""veRL's colocated synchronous baseline (as RollPacker compares against it).

All R x K requests are generated at once on GPUs the trainer shares; rewards
are computed in a separate stage after the whole rollout (the verifier's
worker pool bounds how many run at once); then the trainer takes the GPUs
for R/U updates and the new weights are loaded for the next rollout.
"""

from __future__ import annotations

from harness.runtime import Request, Runtime
from systems.common import BatchCounter, new_groups


class VeRL:
    name = "verl"
    summary = "colocated synchronous: generate all, then a reward stage, then train"

    def __init__(self) -> None:
        self.batches = BatchCounter()

    async def run(self, rt: Runtime) -> None:
        cfg = rt.config
        for rnd in range(cfg.rounds):
            rt.emit("rollout_start", round=rnd, version=rt.engine.version)
            groups = new_groups(rt, rnd, rt.workload.take(cfg.groups))
            futures = [[rt.engine.submit(Request(rnd, g.id, s, g.prompt,
                                                 cfg.max_response_tokens))
                        for s in range(cfg.group_size)] for g in groups]
            for group, group_futures in zip(groups, futures, strict=True):
                group.responses = [await f for f in group_futures]
                rt.emit("group_complete", group=group.id, round=rnd)
            rt.emit("decision", what="reward_stage", round=rnd)
            scores = [[rt.spawn(rt.verifier.score(r)) for r in g.responses] for g in groups]
            for group, group_scores in zip(groups, scores, strict=True):
                group.rewards = [await s for s in group_scores]
            for task in [rt.spawn(rt.materialize(g)) for g in groups]:
                await task
            rt.emit("rollout_complete", round=rnd)
            for i in range(0, len(groups), cfg.update_groups):
                await self.batches.train(rt, groups[i : i + cfg.update_groups])
            await rt.trainer.publish()
