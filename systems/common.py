"""Building blocks every system shares: serving a group, training a batch.

They use the runtime contract only, so they run on either runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from harness.core.runtime import Group, Prompt, Request, Response, Runtime


@dataclass
class PartialGroup:
    """A group in progress across interruptions: its finished samples with their
    rewards, and the partial responses an abort returned (APRIL's carried groups,
    slime-async's requeued ones)."""

    group: Group
    done: dict[int, tuple[Response, float]] = field(default_factory=dict)
    partial: dict[int, Response] = field(default_factory=dict)


def new_groups(rt: Runtime, round: int, prompts: Sequence[Prompt]) -> list[Group]:
    """Groups in submission order, with run-unique ids."""
    return [Group(rt.new_group_id(), round, p) for p in prompts]


async def _score(rt: Runtime, future) -> float:  # type: ignore[no-untyped-def]
    response: Response = await future
    return await rt.verifier.score(response)


async def serve(
    rt: Runtime,
    group: Group,
    priority: int = 0,
    on_complete: Callable[[Group], None] | None = None,
    on_response: Callable[[Response], None] | None = None,
) -> Group:
    """Generate the group's K samples, score each as it finishes (asynchronous
    rewards), and materialise the group once all K are scored. `on_response`
    is told as each sample leaves the engine, `on_complete` when all K have."""
    cfg = rt.config
    futures = [
        rt.engine.submit(Request(group.round, group.id, s, group.prompt,
                                 cfg.max_response_tokens, priority))
        for s in range(cfg.group_size)
    ]
    if on_response is not None:
        for future in futures:
            future.add_done_callback(lambda f: on_response(f.result()))
    scores = [rt.spawn(_score(rt, f)) for f in futures]
    group.responses = [await f for f in futures]
    rt.emit("group_complete", group=group.id, round=group.round)
    if on_complete is not None:
        on_complete(group)
    group.rewards = [await s for s in scores]
    await rt.materialize(group)
    return group


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
