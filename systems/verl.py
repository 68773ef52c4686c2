"""veRL's colocated synchronous baseline (as RollPacker compares against it).

All R x K requests are generated at once on GPUs the trainer shares; rewards
are computed in a separate stage after the whole rollout (the verifier's
worker pool bounds how many run at once); then the trainer takes the GPUs
for R/U updates and the new weights are loaded for the next rollout. It is
Slime's round with that rollout. Each group is served as a whole, unchecked
(`score=False`): complete when its K responses are, its checks in the stage.
"""

from __future__ import annotations

from harness.core.runtime import Group, Runtime
from systems.slime import Slime


class VeRL(Slime):
    name = "verl"
    summary = "colocated synchronous: generate all, then a reward stage, then train"

    async def rollout(self, rt: Runtime, groups: list[Group]) -> None:
        await rt.gather(*(rt.serve(g, score=False) for g in groups))
        rt.emit("decision", what="reward_stage", round=groups[0].round)
        scores = [rt.spawn(rt.verifier.score_all(g.responses)) for g in groups]
        for group, rewards in zip(groups, scores, strict=True):
            group.rewards = await rewards
        await rt.gather(*(rt.materialize(g) for g in groups))
