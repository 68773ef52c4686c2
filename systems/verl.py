"""veRL's colocated synchronous baseline (as RollPacker compares against it).

All R x K requests are generated at once on GPUs the trainer shares; rewards
are computed in a separate stage after the whole rollout (the verifier's
worker pool bounds how many run at once); then the trainer takes the GPUs
for R/U updates and the new weights are loaded for the next rollout. It is
Slime's round with that rollout.
"""

from __future__ import annotations

from harness.core.runtime import Group, Request, Runtime
from systems.slime import Slime


class VeRL(Slime):
    name = "verl"
    summary = "colocated synchronous: generate all, then a reward stage, then train"

    async def rollout(self, rt: Runtime, groups: list[Group]) -> None:
        cfg = rt.config
        futures = [[rt.engine.submit(Request(g.round, g.id, s, g.prompt,
                                             cfg.max_response_tokens))
                    for s in range(cfg.group_size)] for g in groups]
        for group, group_futures in zip(groups, futures, strict=True):
            group.responses = [await f for f in group_futures]
            rt.emit("group_complete", group=group.id, round=group.round)
        rt.emit("decision", what="reward_stage", round=groups[0].round)
        scores = [[rt.spawn(rt.verifier.score(r)) for r in g.responses] for g in groups]
        for group, group_scores in zip(groups, scores, strict=True):
            group.rewards = [await s for s in group_scores]
        await rt.gather(*(rt.materialize(g) for g in groups))
