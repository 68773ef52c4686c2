"""SkyRL's fully-async trainer (NovaSky-AI/SkyRL@a956457).

Rules, each from skyrl/train/fully_async_trainer.py unless named otherwise:

- W generation workers (`num_parallel_generation_workers`), each a loop that
  takes the next prompt, waits for a slot of the capacity gate, generates and
  scores one group, and puts it in the output buffer (:883-941; the prompt is
  taken before the slot is acquired, :891 then :911).
- The capacity gate (:181-199) is AReaL's inequality, shared in
  systems/staleness_gate.py: at most (S + step) x B groups accepted or running,
  with S = `max_staleness_steps`, B = the mini-batch (U groups here: SkyRL
  requires train_batch_size == policy_mini_batch_size, :377-379, so one
  optimizer step per mini-batch) and `step` the step being worked on, and at
  most W running. SkyRL requires B <= W <= B x (S + 1) (:353-363), which the
  config refuses otherwise.
- The trainer takes exactly B groups from the buffer in the order they finished
  ("finish-time FIFO", :807-809), trains one step, syncs the weights in flight
  (generation paused with its requests kept, .claude/docs/weight_sync.md:73),
  then advances the step and wakes the workers (:596-662).
- `clear_kv_cache_on_weight_sync` (skyrl/train/config/config.py:963): the sync
  resets the prefix cache with running requests preempted
  (skyrl/backends/skyrl_train/workers/fsdp/fsdp_worker.py:277-283), which is
  `publish(in_flight=True, recompute=True)`.
- Nothing is dropped: a group staler than S is trained anyway, with a warning
  (docs/content/docs/tutorials/fully_async.mdx:271-279).

The gate bounds staleness in aggregate only, so the rule promises no bound per
token (`staleness_bound` is None; fully_async.mdx:192 and :271 say so); the aggregate
it bounds, (S + 1) x U groups accepted and untrained or running, is `backlog_bound`.

Harness readings: the run is one epoch (SkyRL keeps no asynchrony across epochs,
:9-11; a "round" here is a block of R/U steps, as for PipelineRL);
`sample_full_batch` (zero-variance filtering) is not modelled: off by default
and it needs `zero_variance_filter`, which the harness does not have.

Placement: disaggregated only. The trainer asserts `colocate_all` is off ("colocate_all
is not supported for async training yet", :392), so the engines never share the
trainer's GPUs; a colocated run is refused (harness/run/checks.py).
"""

from __future__ import annotations

from typing import Any

from harness.core.runtime import Group, Runtime
from systems.common import BatchCounter
from systems.staleness_gate import CapacityGate, backlog_bound


class SkyRLAsync:
    name = "skyrl-async"
    summary = "SkyRL fully async: W workers behind a (S + step) x B capacity gate, in-flight sync"
    placements = ("disaggregated",)
    placement_why = ("SkyRL's fully-async trainer asserts colocate_all is off, NovaSky-AI/"
                     "SkyRL@a956457:skyrl/train/fully_async_trainer.py:392")
    knobs: tuple[str, ...] = ("update_groups", "skyrl.max_staleness_steps",
                              "skyrl.num_parallel_generation_workers",
                              "skyrl.clear_kv_cache_on_weight_sync")

    def __init__(self) -> None:
        self.batches = BatchCounter()

    def staleness_bound(self, cfg: Any) -> int | None:
        """None: the capacity gate bounds the aggregate, not each group."""
        return None

    def backlog_bound(self, cfg: Any) -> int:
        """The aggregate the gate does bound: (S + 1) x U groups accepted and untrained
        or running (fully_async_trainer.py:181-187; systems/staleness_gate.py)."""
        return backlog_bound(cfg.skyrl.max_staleness_steps, cfg.update_groups,
                             cfg.group_size)

    async def run(self, rt: Runtime) -> None:
        cfg = rt.config
        sky = cfg.skyrl
        u = cfg.update_groups
        steps_per_round = cfg.groups // u
        total_steps = cfg.rounds * steps_per_round
        gate = CapacityGate(sky.workers(cfg), u, sky.max_staleness_steps)
        changed = rt.event()
        buffer: list[Group] = []  # finished groups, in finishing order
        state = {"prompts": total_steps * u, "round": 0, "done": 0}  # done: steps completed

        async def wait() -> None:
            changed.clear()
            await changed.wait()

        async def worker() -> None:
            while state["prompts"] > 0:
                state["prompts"] -= 1
                (prompt,) = rt.workload.take(1)
                while gate.capacity(state["done"]) <= 0:
                    await wait()
                gate.submit()
                group = Group(rt.new_group_id(), state["round"], prompt)
                buffer.append(await rt.serve(group))
                gate.accept()
                changed.set()

        workers = [rt.spawn(worker()) for _ in range(gate.max_concurrent)]
        for step in range(total_steps):
            if step % steps_per_round == 0:
                state["round"] = step // steps_per_round
                rt.emit("rollout_start", round=state["round"], version=rt.trainer.version)
            while len(buffer) < u:
                await wait()
            batch, buffer[:u] = buffer[:u], []
            await self.batches.train(rt, batch)
            await rt.trainer.publish(in_flight=True, recompute=sky.clear_kv_cache_on_weight_sync)
            state["done"] = step + 1
            changed.set()
            if (step + 1) % steps_per_round == 0:
                rt.emit("rollout_complete", round=state["round"])
        await rt.gather(*workers)
