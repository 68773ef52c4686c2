"""NeMo-RL's async GRPO (NVIDIA-NeMo/RL@7ea279abfbeb698b092856d0dab61e7cf39bc909).

Rules, from nemo_rl/algorithms/ (commit 7ea279a):

- Generation is per *target step*: the collector generates one whole batch
  (N = `num_prompts_per_step` groups: U here) for a training step it reserves,
  from the weights it has now (async_utils/trajectory_collector.py:457-544).
  From version v it may serve targets v+1 .. v+A, A = `max_trajectory_age_steps`
  (the generation lead equals the age limit, :162-163); from the first version
  v0 also v0 itself (:189-217). A target already consumed, already generating or
  complete is skipped (:219-255); with none left the collector waits for the
  next weight update (:295-325, :257-266). Each target's batch is generated
  concurrently with the other targets'.
- Step w trains exactly the N groups whose target is w, first finished first,
  and stalls until all N are there (async_utils/replay_buffer.py:196-329). A
  group generated from version g for target w has w - g <= A by construction,
  so the age filter of :225-250 drops nothing here (it evicts after a
  checkpoint restore); so every token lags at most A steps: `staleness_bound`.
- Before the first step the trainer also waits for step 1's batch, the
  lookahead barrier (algorithms/grpo.py:4428-4470).
- After each step: new batch starts pause (trajectory_collector.py:606-620);
  without `in_flight_weight_updates` the trainer waits for every generation in
  flight to finish (:649-664), with it they run on (their later tokens come
  from the new weights); the weights are published, the version advances, and
  with `recompute_kv_cache_after_weight_updates` the KV cache is invalidated
  (:669-702, vLLM's `reset_prefix_cache`, models/generation/vllm/
  vllm_generation.py:1260-1280): `publish(recompute=True)`. Then batch starts
  resume (grpo.py:4937-4974).
- Nothing started is dropped.

With in-flight updates this is PipelineRL's admission arithmetic with
`max_lag` = A (at most U x (v + 1 + A) groups started while the engines serve
v, trained in start order): on the same config both give the same lags
(tests/test_nemo_rl_async.py). The code is not shared because the mechanisms
differ where that arithmetic does not bind: NeMo-RL starts a target's N groups
together (PipelineRL starts a group whenever K slots of its concurrency H are
free), waits for step 1's batch before step 0, and by default drains
generation before every update.

Harness readings: the replay buffer's size (N x A x slack, grpo.py:4229) never
binds here, since at most A + 1 targets are ever generated ahead; a "round" is
a block of R/U steps.
"""

from __future__ import annotations

from typing import Any

from harness.core.runtime import Group, Handle, Runtime
from systems.common import BatchCounter


class NemoRLAsync:
    name = "nemo-rl-async"
    summary = "NeMo-RL async GRPO: whole batches generated for target steps up to A ahead"
    knobs: tuple[str, ...] = ("update_groups", "nemo_rl.max_trajectory_age_steps",
                              "nemo_rl.in_flight_weight_updates",
                              "nemo_rl.recompute_kv_cache_after_weight_updates")

    def __init__(self) -> None:
        self.batches = BatchCounter()

    def staleness_bound(self, cfg: Any) -> int | None:
        """A target is at most A steps past the version that generated it."""
        return int(cfg.nemo_rl.max_trajectory_age_steps)

    async def run(self, rt: Runtime) -> None:
        cfg = rt.config
        nemo = cfg.nemo_rl
        lead, n = nemo.max_trajectory_age_steps, cfg.update_groups
        steps_per_round = cfg.groups // n
        total_steps = cfg.rounds * steps_per_round
        changed = rt.event()
        ready: dict[int, list[Group]] = {}  # target step -> its finished groups
        reserved: set[int] = set()  # targets generating or generated
        workers: list[Handle[None]] = []
        state = {"version": 0, "starts_open": True, "round": 0}

        async def wait() -> None:
            changed.clear()
            await changed.wait()

        def targets(version: int) -> range:
            first = version if version == 0 else version + 1
            return range(first, min(version + lead + 1, total_steps))

        async def batch(target: int) -> None:
            prompts = rt.workload.take(n)
            groups = [Group(rt.new_group_id(), target // steps_per_round, p) for p in prompts]

            async def one(group: Group) -> None:
                ready.setdefault(target, []).append(await rt.serve(group))
                changed.set()

            await rt.gather(*(one(g) for g in groups))

        async def collect() -> None:
            while len(reserved) < total_steps:
                todo = [t for t in targets(state["version"]) if t not in reserved]
                if not todo or not state["starts_open"]:
                    await wait()
                    continue
                reserved.add(todo[0])
                workers.append(rt.spawn(batch(todo[0])))

        collector = rt.spawn(collect())
        for step in range(total_steps):
            if step % steps_per_round == 0:
                state["round"] = step // steps_per_round
                rt.emit("rollout_start", round=state["round"], version=rt.trainer.version)
            wanted = [step, step + 1] if step == 0 and lead > 0 and total_steps > 1 else [step]
            while any(len(ready.get(t, [])) < n for t in wanted):
                await wait()
            await self.batches.train(rt, ready.pop(step))
            state["starts_open"] = False
            if not nemo.in_flight_weight_updates:
                await rt.gather(*workers)
            await rt.trainer.publish(in_flight=nemo.in_flight_weight_updates,
                                     recompute=nemo.recompute_kv_cache_after_weight_updates)
            state["version"] = rt.trainer.version
            state["starts_open"] = True
            changed.set()
            if (step + 1) % steps_per_round == 0:
                rt.emit("rollout_complete", round=state["round"])
        await collector
        await rt.gather(*workers)
