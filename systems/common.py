"""Building blocks every system shares: groups, partial groups, training a batch.

They use the runtime contract only, so they run on either runtime (serving a group is
the runtime's own call, `rt.serve`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.core.runtime import Group, Handle, PartialGroup, Prompt, Request, Runtime

__all__ = ["BatchCounter", "PartialGroup", "admission_room", "emit_when_done", "new_groups",
           "serve_partial"]


def emit_when_done(rt: Runtime, task: Handle[Any], ev: str, **fields: Any) -> None:
    """`rt.emit(ev, **fields)` once `task` has returned: not when the run's end cancels it
    (Ctrl-C, a fault elsewhere) nor when it fails, where the event would claim work that
    never finished (a `rollout_complete` of a round half generated)."""

    def done(task: Handle[Any]) -> None:
        if not task.cancelled() and task.exception() is None:
            rt.emit(ev, **fields)

    task.add_done_callback(done)


async def serve_partial(rt: Runtime, work: PartialGroup, priority: int = 0) -> bool:
    """Run a carried group's unfinished samples, each resuming its partial response, and
    score the finished ones in sample order as they are awaited; True once all K are done
    and the group materialised, False when an abort stopped it first (its partial
    responses kept in `work` for the next attempt). SortedRL's serve; APRIL and slime-async
    call `rt.serve(group, resume=work)`, which scores each sample as it ends."""
    cfg, group = rt.config, work.group
    pending = {s: rt.engine.submit(Request(group.round, group.id, s, group.prompt,
                                           cfg.max_response_tokens, priority,
                                           resume=work.partial.pop(s, None)))
               for s in range(cfg.group_size) if s not in work.done}
    for s, attempt in pending.items():
        response = await attempt
        if response.status == "finished":
            work.done[s] = (response, await rt.verifier.score(response))
        elif response.tokens > 0:
            work.partial[s] = response
    if len(work.done) < cfg.group_size:
        return False
    group.responses = [work.done[s][0] for s in range(cfg.group_size)]
    group.rewards = [work.done[s][1] for s in range(cfg.group_size)]
    rt.emit("group_complete", group=group.id, round=group.round)
    await rt.materialize(group)
    return True


def admission_room(started: int, update_groups: int, version: int, max_lag: int) -> int:
    """Groups that may still be started while the policy is at `version`: PipelineRL's
    admission rule, at most U x (v + 1 + max_lag) groups started in all (max_lag -1: no
    limit, a very large number). Laminar's `max_staleness` is the same rule."""
    if max_lag < 0:
        return 1 << 62
    return max(0, update_groups * (version + 1 + max_lag) - started)


def new_groups(rt: Runtime, round: int, prompts: Sequence[Prompt]) -> list[Group]:
    """Groups in submission order, with run-unique ids."""
    return [Group(rt.new_group_id(), round, p) for p in prompts]


class BatchCounter:
    """Batch ids unique across the run, owned by the system instance."""

    def __init__(self) -> None:
        self.next = 0

    async def dispatch(self, rt: Runtime, groups: Sequence[Group], gpus: int | None = None
                       ) -> None:
        """Dispatch a batch and accumulate its gradient (no optimizer step)."""
        batch, self.next = self.next, self.next + 1
        rt.emit("batch_dispatch", batch=batch, groups=[g.id for g in groups],
                round=groups[0].round)
        await rt.trainer.train(batch, groups, gpus)

    async def train(self, rt: Runtime, groups: Sequence[Group]) -> None:
        """Dispatch one logical batch, train on it, take one optimizer step."""
        await self.dispatch(rt, groups)
        await rt.trainer.step()
