"""PipelineRL: generation never stops; weights are updated in flight.

The engine keeps about H sequences in flight per replica: a new group is
started whenever K slots are free. The trainer takes U complete groups
(B = U x K samples) per optimizer step as they arrive and, after every step,
installs the new weights in the engines without stopping them (they pause
only for the transfer and keep their KV cache), so a response may carry
tokens of several policy versions.

`max_lag` (optimizer steps, -1 for none) is admission control as in
PipelineRL's implementation: at most U x (v + 1 + max_lag) groups may have
been started while the engines serve version v. With a limit the trainer also
takes groups in the order they were started, so no token is trained more
than `max_lag` steps after the version that generated it.

There is no rollout boundary: for the per-round metrics a "round" is a block
of R/U optimizer steps.

Placement: disaggregated only. PipelineRL's launcher hands each inference server GPUs
of its own, taken out of the node's pool (ServiceNow/PipelineRL@58d39345:
pipelinerl/world.py:230-268), and the trainer only the GPUs left over (:85-96); no
GPU serves both, so a colocated run is refused (harness/run/checks.py).
"""

from __future__ import annotations

from typing import Any

from harness.core.runtime import Group, Response, Runtime
from systems.common import BatchCounter, admission_room


class PipelineRL:
    name = "pipelinerl"
    summary = "continuous generation at concurrency H, in-flight weight updates every step"
    placements = ("disaggregated",)
    placement_why = ("PipelineRL's launcher gives the trainer only the GPUs its inference "
                     "servers left, ServiceNow/PipelineRL@58d39345:pipelinerl/world.py:85-96")
    knobs: tuple[str, ...] = ("update_groups", "concurrency", "max_lag")

    def __init__(self) -> None:
        self.batches = BatchCounter()

    def staleness_bound(self, cfg: Any) -> int | None:
        """`max_lag` steps when set (its admission rule and start-order training, the
        module's docstring); without it nothing bounds how long a response may take."""
        return cfg.max_lag if cfg.max_lag >= 0 else None

    async def run(self, rt: Runtime) -> None:
        cfg = rt.config
        k, u = cfg.group_size, cfg.update_groups
        steps_per_round = cfg.groups // u
        total_steps = cfg.rounds * steps_per_round
        target = cfg.concurrency * rt.engine.replicas
        changed = rt.event()
        done: dict[int, Group] = {}  # start order -> materialised group
        arrivals: list[int] = []  # start orders in materialisation order
        state = {"inflight": 0, "round": 0}

        def release(_response: Response) -> None:
            state["inflight"] -= 1
            changed.set()

        async def one_group(group: Group, order: int) -> None:
            done[order] = await rt.serve(group, on_response=release)
            arrivals.append(order)
            changed.set()

        async def generate() -> None:
            started = 0
            while started < total_steps * u:
                room = state["inflight"] + k <= target
                lag_ok = admission_room(started, u, rt.engine.version, cfg.max_lag) > 0
                if not (room and lag_ok):
                    changed.clear()
                    await changed.wait()
                    continue
                (prompt,) = rt.workload.take(1)
                group = Group(rt.new_group_id(), state["round"], prompt)
                state["inflight"] += k
                rt.spawn(one_group(group, started))
                started += 1

        async def next_batch(step: int) -> list[Group]:
            if cfg.max_lag >= 0:  # in start order: the oldest groups first
                wanted = range(step * u, (step + 1) * u)
                while any(i not in done for i in wanted):
                    changed.clear()
                    await changed.wait()
                return [done.pop(i) for i in wanted]
            while len(arrivals) < u:  # in arrival order, as they complete
                changed.clear()
                await changed.wait()
            taken, arrivals[:u] = arrivals[:u], []
            return [done.pop(i) for i in taken]

        generator = rt.spawn(generate())
        for step in range(total_steps):
            if step % steps_per_round == 0:
                state["round"] = step // steps_per_round
                rt.emit("rollout_start", round=state["round"], version=rt.trainer.version)
            await self.batches.train(rt, await next_batch(step))
            await rt.trainer.publish(in_flight=True)
            changed.set()
            if (step + 1) % steps_per_round == 0:
                rt.emit("rollout_complete", round=state["round"])
        await generator
