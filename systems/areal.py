"""AReaL: admission by version arithmetic, generation interrupted at every weight update.

Written from inclusionAI/AReaL@4aef98d (cited below as AReaL@4aef98d). One AReaL
rollout is one prompt's group: the grouped workflow runs K single-sample episodes
(areal/infra/remote_inf_engine.py:83-91), each scored as soon as it is generated
(areal/workflow/rlvr.py:139-162). Its consumer batch is U groups.

- Admission (areal/infra/staleness_manager.py:99-113): a new group starts while
  capacity = min(max_concurrent_rollouts - running, (max_head_offpolicyness +
  version + 1) x U - (accepted + running)) is positive (workflow_executor.py:
  436-446), `version` being the rollout engine's, set after each weight update
  (areal/trainer/rl_trainer.py:731-738). The inequality is systems/staleness_gate.py,
  shared with SkyRL and tinker. `max_concurrent_rollouts` unset is U
  (workflow_executor.py:760-761); a rollout is running from its start until its last
  reward, and accepted then (:1111-1112).
- Training (rl_trainer.py:573-580, workflow_executor.py:546-603): a step waits until
  U groups are complete, then takes the U that *started* earliest among those
  complete (`drained.sort(key=create_time)`, the task's start time: async_task_runner.
  py:442-446, 371-372). A group still generating does not hold a step back, so
  younger groups may pass it.
- Weight update (rl_trainer.py:716-738, 822): after the optimizer step, admission
  pauses, every request in flight is aborted, the weights go to the engine, the
  version moves on, and the interrupted samples go on from their prefix under the
  new weights with the KV cache recomputed (systems/interrupt.py says how and why
  this is abort and resume, not an in-flight update).

So `max_head_offpolicyness` bounds how far a group's *admission* may lead the
trainer, not the lag of its trained tokens: a group that generates for many steps
keeps its early tokens, and the trainer does not wait for it. AReaL's users have
asked (areal-project/AReaL#602) and the code promises no bound: `staleness_bound`
is None, and tests/test_areal.py measures how far past the knob the lag goes. What
admission does bound is the backlog, (max_head_offpolicyness + 1) x U groups started
and untrained (`backlog_bound`), which `rolloutbench check` holds an AReaL trace to:
AReaL#1388's resumed run broke it.

Defaults (docs/systems.md): AReaL's math example's, offpolicyness 2 and 256 rollouts in
flight (examples/math/gsm8k_grpo.yaml:25, 28). The code default, 0 and U
(`--set areal.max_head_offpolicyness=0 --set areal.max_concurrent_rollouts=0`), is the
synchronous mode AReaL's docs keep for debugging (docs/en/algorithms/async.md:8-10).

Harness readings (choices, not AReaL's code):
- AReaL's data loader cycles forever and a run's leftovers die with the process;
  here no group starts once every group the run will train has started (as
  systems/pipelinerl.py), so each started group is trained once.
- The pending-input queue of (ofp + 1) x U prompts (workflow_executor.py:676-701),
  refilled while the trainer waits, is not modelled: past the first step it holds
  more than admission can take. Neither are rejected rollouts (none here) nor the
  split of both caps over data-parallel ranks (:955-959), which sums to the same.
There is no rollout boundary: a "round" is a block of R/U optimizer steps, and an
attempt resumed after an update is the work of the round under way (a round is over
once its rollout_complete is written; `Interrupter.round`).
"""

from __future__ import annotations

from typing import Any

from harness.core.runtime import Group, Runtime
from systems.common import BatchCounter
from systems.interrupt import Interrupter
from systems.staleness_gate import CapacityGate, backlog_bound


class AReaL:
    name = "areal"
    summary = "admit by version arithmetic; abort at each weight update, resume the prefix"
    knobs: tuple[str, ...] = ("update_groups", "areal.max_head_offpolicyness",
                              "areal.max_concurrent_rollouts")

    def __init__(self) -> None:
        self.batches = BatchCounter()

    def staleness_bound(self, cfg: Any) -> int | None:
        """None: AReaL bounds admission, not the lag of trained tokens (see above)."""
        return None

    def backlog_bound(self, cfg: Any) -> int:
        """What admission does bound: (max_head_offpolicyness + 1) x U groups started and
        untrained (staleness_manager.py:99-113, 119-121; systems/staleness_gate.py)."""
        return backlog_bound(cfg.areal.max_head_offpolicyness, cfg.update_groups,
                             cfg.group_size)

    async def run(self, rt: Runtime) -> None:
        cfg = rt.config
        u = cfg.update_groups
        steps_per_round = cfg.groups // u
        total_steps = cfg.rounds * steps_per_round
        gate = CapacityGate(cfg.areal.concurrent(cfg), u, cfg.areal.max_head_offpolicyness)
        self.interrupter = Interrupter(rt)
        changed = rt.event()
        done: dict[int, Group] = {}  # start order -> complete, untrained
        state = {"started": 0, "round": 0}

        async def episode(group: Group, order: int) -> None:
            # K single-sample episodes, each scored as it ends and resumed after an update
            await rt.serve(group, retry=True, gate=self.interrupter)
            gate.accept()  # staleness_manager.py:150-157
            done[order] = group
            changed.set()

        async def produce() -> None:
            while state["started"] < total_steps * u:
                if gate.capacity(rt.engine.version) <= 0 or not self.interrupter.open.is_set():
                    changed.clear()
                    await changed.wait()
                    continue
                (prompt,) = rt.workload.take(1)
                group = Group(rt.new_group_id(), state["round"], prompt)
                gate.submit()
                rt.spawn(episode(group, state["started"]))
                state["started"] += 1

        producer = rt.spawn(produce())
        for step in range(total_steps):
            if step % steps_per_round == 0:
                state["round"] = self.interrupter.round = step // steps_per_round
                rt.emit("rollout_start", round=state["round"], version=rt.trainer.version)
            while len(done) < u:
                changed.clear()
                await changed.wait()
            await self.batches.train(rt, [done.pop(i) for i in sorted(done)[:u]])
            await self.interrupter.update(rt)
            changed.set()
            if (step + 1) % steps_per_round == 0:
                rt.emit("rollout_complete", round=state["round"])
        await producer
