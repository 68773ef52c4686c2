"""SortedRL: online length-aware scheduling with early updates (arXiv 2603.23414).

Source: Zhang et al., "SortedRL: Accelerating RL Training for LLMs through Online
Length-Aware Scheduling", arXiv 2603.23414v1 (2026-03-24); no code release is public.
The stored copy of the paper reaches only its abstract and the opening of Sec. 1, so
every rule below cites the abstract ("Abs.") or the OpenReview TL;DR of its ICLR 2026
submission (openreview.net/forum?id=5v3Gzuic8i, "TL;DR"); docs/systems.md ("SortedRL")
lists the other readings the abstract leaves open, and what a search on 2026-11-29 found
(no body text, no code; a machine-written digest that agrees with the rules, no source).

- A large rollout batch: the R groups of a round are loaded at once, all R x K samples
  submitted together (Abs.: "enables large rollout batches"; TL;DR: "rollout at max
  batch size").
- Samples are ordered by output length as they finish: the engine ends short ones
  first, and a group joins the update queue when its K samples are done (Abs.:
  "reorders rollout samples based on output lengths, prioritizing short samples
  forming groups for early updates").
- An update batch of U complete groups is trained as soon as U are complete (Abs.:
  "flexible update batches", "early updates"): the rollout is stopped (every unfinished
  sample aborted, its partial response kept), the U groups make one optimizer step, the
  new weights are published, and the rollout goes on under them. A round is R/U such
  updates; its last batch is its U longest groups.
- The off-policy degree is controlled by a cache (Abs.: "control the degree of
  off-policy training through a cache-based mechanism"): an unfinished group's work
  (its finished samples and the partial responses of the others) is cached across an
  update and resumed under the new weights, across at most `max_lag` updates; a group
  whose work would be carried further is regenerated from scratch under the newest
  weights. `max_lag` 0 regenerates every unfinished group at each update, so every
  trained token comes from the policy it trains (TL;DR: "without off-policiness"); the
  default -1 (no limit) carries work across every update of its round, R/U - 1 at
  most (Abs.: "near on-policy"). The stored text gives no default for the cache.
  A complete group left over (it completed in the same instant as the U-th) is cached
  work too, under the same rule. A regenerated group is a new group of the same prompt
  (a `drop_group` decision names the old one and says why), so that each request id
  keeps one line of work: aborted, then resumed with its tokens. `max_lag` is the
  shared field PipelineRL reads with the same meaning (the most steps a trained token
  may lag), not a table of its own.
"""

from __future__ import annotations

from typing import Any

from harness.core.runtime import Group, Handle, Runtime
from systems.common import BatchCounter, PartialGroup, new_groups, serve_partial


class SortedRL:
    """A round is one rollout batch drained by R/U early updates (`_round`)."""

    name = "sortedrl"
    summary = "length-sorted early updates: train U groups as they finish, abort and resume"
    knobs: tuple[str, ...] = ("update_groups", "max_lag")

    def __init__(self) -> None:
        self.batches = BatchCounter()

    @staticmethod
    def plan_knobs(plan: Any) -> dict[str, list[Any]]:
        """The cache bounds `rolloutbench plan` tries: 0, 1, 2, 4 below R/U - 1 and -1
        (every update: lag R/U - 1), those within --max-lag; with --on-policy only 0
        (resumed tokens span versions: a group must be regenerated at each update)."""
        most = plan.recipe.groups // plan.recipe.update_groups - 1
        bound = plan.limits.lag_bound
        lags = [0] if plan.limits.on_policy else [*(v for v in (0, 1, 2, 4) if v < most), -1]
        return {"max_lag": [v for v in lags if bound is None or (most if v < 0 else v) <= bound]}

    def staleness_bound(self, cfg: Any) -> int | None:
        """min(max_lag, R/U - 1) (R/U - 1 with no limit): cached work crosses at most
        max_lag updates, and a round's groups all train within its R/U updates."""
        steps = cfg.groups // cfg.update_groups - 1
        return steps if cfg.max_lag < 0 else min(cfg.max_lag, steps)

    def backlog_bound(self, cfg: Any) -> int:
        """R x K samples: the rollout batch is all a round generates ahead of its updates
        (at max_lag 0, the finished samples of unfinished groups wait, then are dropped;
        `rolloutbench check`'s (L + 1) x U x K would not hold them)."""
        return cfg.groups * cfg.group_size

    async def run(self, rt: Runtime) -> None:
        for rnd in range(rt.config.rounds):
            rt.emit("rollout_start", round=rnd, version=rt.engine.version)
            await self._round(rt, rnd)
            rt.emit("rollout_complete", round=rnd)

    async def _round(self, rt: Runtime, rnd: int) -> None:
        """R/U updates: each waits for U complete groups, stops the rest, trains."""
        cfg = rt.config
        u, steps = cfg.update_groups, cfg.groups // cfg.update_groups
        limit = steps if cfg.max_lag < 0 else cfg.max_lag  # -1: never regenerate
        untrained = [PartialGroup(g) for g in new_groups(rt, rnd,
                                                         rt.workload.take(cfg.groups))]
        ready: list[PartialGroup] = []  # complete, untrained, in completion order
        age = {w.group.id: 0 for w in untrained}  # updates its cached work has crossed
        for step in range(steps):
            enough = rt.event()
            live: dict[Handle[None], PartialGroup] = {}

            async def serve(work: PartialGroup, enough: Any = enough) -> None:
                if await self._serve(rt, work):
                    ready.append(work)
                    if len(ready) >= u:
                        enough.set()

            if len(ready) >= u:
                enough.set()
            else:
                for work in untrained:
                    if work not in ready:
                        live[rt.spawn(serve(work))] = work
            await enough.wait()
            if step < steps - 1:  # early termination: stop the rest, keep their work
                ids = [f"{w.group.id}.{s}" for w in live.values()
                       for s in range(cfg.group_size) if s not in w.done]
                # `ids` holds finished samples not yet scored too (a group's are scored in
                # sample order): the engine's answer counts only the ones it stopped
                cut = await rt.engine.abort(ids)
                rt.emit("decision", what="early_update", round=rnd, step=step,
                        stopped=sum(r.status == "aborted" for r in cut))
            for task in live:
                await task
            batch, ready[:] = ready[:u], ready[u:]
            untrained = [w for w in untrained if w not in batch]
            await self.batches.train(rt, [w.group for w in batch])
            await rt.trainer.publish()
            for i, work in enumerate(untrained):  # its cached work crosses this update
                age[work.group.id] += 1
                if age[work.group.id] > limit:
                    untrained[i] = fresh = self._regenerate(rt, work, ready)
                    age[fresh.group.id] = 0

    @staticmethod
    def _regenerate(rt: Runtime, work: PartialGroup, ready: list[PartialGroup]
                    ) -> PartialGroup:
        """Drop a group's cached work: its prompt starts again as a new group, all K
        samples under the newest weights (a complete group left over leaves the queue)."""
        old = work.group
        fresh = PartialGroup(Group(rt.new_group_id(), old.round, old.prompt))
        rt.emit("decision", what="drop_group", group=old.id, regenerated_as=fresh.group.id,
                reason="cached work past max_lag: regenerated under the new weights")
        if work in ready:
            ready.remove(work)
        return fresh

    @staticmethod
    async def _serve(rt: Runtime, work: PartialGroup) -> bool:
        """The group's unfinished samples, each resuming its cached partial response
        (`serve_partial`, APRIL's serve without its priority)."""
        return await serve_partial(rt, work)
