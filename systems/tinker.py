"""tinker: paced sampling, stalest-first batches, the trainer waits at the deadline.

Written from the cookbook's asynchronous RL loop as pull request #822 rewrites it
("enforce staleness by pacing sampling instead of discarding rollouts"), at its head
thinking-machines-lab/tinker-cookbook@0d7fee56 (branch async-rl-blocking-staleness;
cited below as train.py, tinker_cookbook/rl/train.py there):

- Workers: one per batch slot, U of them, each rolling out one group at a time
  (train.py:1123-1127, 1187-1239, 1293-1298): at most U groups generate at once.
- Admission (train.py:996-1008, 1159-1162, 1195-1201): a worker starts a group only
  while fewer than U x (pipeline_depth + 1) groups are started but untrained; a
  trained batch's slots free up once the new sampler is in place (:1408-1418). With
  `accepted` counting every finished group, U x v of them trained after v steps,
  that is AReaL's inequality, capacity = min(U - running, (pipeline_depth + v + 1) x
  U - (accepted + running)) > 0, the U workers being its concurrency cap: the code is
  systems/staleness_gate.py, shared with AReaL and SkyRL. The group samples from the
  weights current at its start and records that version (:1202-1212).
- Training (train.py:1269-1343): step t waits until U groups are complete *and* no
  group started at version <= t - max_steps_off_policy is still generating (the
  deadline: :1281, 1294-1301), then sorts the complete groups by start version,
  stalest first, and trains the first U (:1337-1339). Nothing is discarded
  (:451-454); no group starts once the last step has been trained (:1420-1424).
- `pipeline_depth` unset is min(1, max_steps_off_policy) (:485-488).

The cookbook proves (train.py:973-985) that every trained group then has
t - s <= max_steps_off_policy, for s its start version: `staleness_bound` is
max_steps_off_policy.

Where the harness differs, and why: tinker's sampler keeps serving a group the
weights it started with after new ones are published; the runtime's engine has one
set of weights, so the new weights are installed in flight (`publish(in_flight=True)`)
and the tokens of a group generated after an update carry the newer version. Every
token is then at least as fresh as tinker's, so the bound holds the same way; the
measured lag is at most tinker's. The start version that the deadline and the sort
read is the system's own record, as in tinker. No group is discarded, so the run
starts exactly the R x rounds groups it trains (the cookbook's data loader holds
that many). There is no rollout boundary: a "round" is a block of R/U steps.
"""

from __future__ import annotations

from typing import Any

from harness.core.runtime import Group, Runtime
from systems.common import BatchCounter
from systems.staleness_gate import CapacityGate, backlog_bound


class Tinker:
    name = "tinker"
    summary = "U workers, at most U x (depth + 1) groups untrained, stalest first, none dropped"
    knobs: tuple[str, ...] = ("update_groups", "tinker.max_steps_off_policy",
                              "tinker.pipeline_depth")

    def __init__(self) -> None:
        self.batches = BatchCounter()

    def staleness_bound(self, cfg: Any) -> int | None:
        """max_steps_off_policy: the trainer waits for any group at its deadline."""
        return int(cfg.tinker.max_steps_off_policy)

    def backlog_bound(self, cfg: Any) -> int:
        """The admission gate's: U x (pipeline_depth + 1) groups started but untrained
        (train.py:996-1008; systems/staleness_gate.py), tighter than the staleness
        bound's (max_steps_off_policy + 1) x U whenever the depth is below it."""
        return backlog_bound(cfg.tinker.depth(), cfg.update_groups, cfg.group_size)

    async def run(self, rt: Runtime) -> None:
        cfg = rt.config
        u = cfg.update_groups
        bound = cfg.tinker.max_steps_off_policy
        steps_per_round = cfg.groups // u
        total_steps = cfg.rounds * steps_per_round
        gate = CapacityGate(u, u, cfg.tinker.depth())  # U workers, U a batch
        changed = rt.event()
        running: dict[int, int] = {}  # start version -> groups still generating
        complete: list[tuple[int, Group]] = []  # (start version, group), untrained
        state = {"started": 0, "round": 0}

        async def rollout(group: Group, version: int) -> None:
            await rt.serve(group)
            gate.accept()
            running[version] -= 1  # done and queued with no await between (:1030-1051)
            complete.append((version, group))
            changed.set()

        async def produce() -> None:
            while state["started"] < total_steps * u:
                if gate.capacity(rt.engine.version) <= 0:
                    changed.clear()
                    await changed.wait()
                    continue
                gate.submit()
                state["started"] += 1
                version = rt.engine.version
                running[version] = running.get(version, 0) + 1
                (prompt,) = rt.workload.take(1)
                rt.spawn(rollout(Group(rt.new_group_id(), state["round"], prompt), version))

        def ready(step: int) -> bool:
            late = sum(n for v, n in running.items() if v <= step - bound)
            return len(complete) >= u and late == 0

        producer = rt.spawn(produce())
        for step in range(total_steps):
            if step % steps_per_round == 0:
                state["round"] = step // steps_per_round
                rt.emit("rollout_start", round=state["round"], version=rt.trainer.version)
            while not ready(step):
                changed.clear()
                await changed.wait()
            complete.sort(key=lambda entry: entry[0])  # stable: arrival order within a version
            batch = [group for _, group in complete[:u]]
            del complete[:u]
            await self.batches.train(rt, batch)
            await rt.trainer.publish(in_flight=True)
            changed.set()
            if (step + 1) % steps_per_round == 0:
                rt.emit("rollout_complete", round=state["round"])
        await producer
