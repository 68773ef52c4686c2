"""Building blocks every system shares: groups, partial groups, training a batch.

They use the runtime contract only, so they run on either runtime (serving a group is
the runtime's own call, `rt.serve`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.core.runtime import Group, Prompt, Response, Runtime


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
