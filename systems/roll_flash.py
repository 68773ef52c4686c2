"""ROLL Flash: ROLL's RLVR pipeline run asynchronously (arXiv 2510.11345, alibaba/ROLL).

Every rule is read from alibaba/ROLL@8eb27cc2 (G: roll/distributed/scheduler/
generate_scheduler.py, L: roll/distributed/scheduler/user_defined_rollout_loop.py, P:
roll/pipeline/rlvr/rlvr_pipeline.py); B, ROLL's rollout_batch_size, is U here.

- Prompt replication: a prompt's K samples are K requests of one sample each
  (`is_num_return_sequences_expand`, G:36-50, called at L:212), which the asynchronous
  pipeline requires (L:63, one output a request) and ROLL's async example sets
  (examples/qwen2.5-7B-rlvr_megatron/rlvr_config_async.yaml:30).
- Queue scheduling: each sample is scored the moment its generation ends (L:249-287,
  generate then compute_rewards, per request) and a new prompt starts whenever the budget
  has room (G:746-758, `sending_request` over `poll`, G:256-268); a group is committed
  once all K of its samples are scored (L:221, G:857-876).
- The budget (G:223-253): prompts started and not given up number fewer than
  ceil(ratio x B) + (s + 1) x B during step s. That is the capacity gate AReaL and SkyRL
  share, with max_staleness = ratio (systems/staleness_gate.py, shared, not copied).
- Requests in flight: at most `max_running_requests` per engine replica, a request waiting
  for room (the PromptAffinityRouter's acquire and reacquire, roll/distributed/scheduler/
  router.py:861-935); here the cap is summed over the replicas.
- Each step s >= 1 begins with `pause_sampling` (G:552-557, called at P:510-513): the
  groups begun in step s - 1 - ceil(ratio) or earlier and still running are given up
  and their prompts replaced
  (`gc`, G:400-433 and 546-550), every request in flight is aborted, the weights are
  updated (P:516-518) and generation resumes (G:650); an aborted request is sent again
  with its tokens (L:277-285, `collect_unfinished` in the asynchronous pipeline, P:500).
  That update is systems/interrupt.py's, which AReaL and slime-async share.
- The batch (ReplayBuffer.get_batch, G:342-398): B groups from the steps in [s -
  ceil(ratio), s], the oldest step first, waiting for that step's running groups before
  taking any newer one (ItemsGroup.get_batch, G:122-147); of the oldest step only
  int(frac(ratio) x B x K) samples, whole groups, when the ratio is fractional (G:366-370);
  within a step in the order the groups were committed. Then one training step (P:570-740)
  while generation goes on. With ratio 0 the budget is exactly the step's B groups, so
  nothing generates while the trainer trains: ROLL's synchronous pipeline.

Staleness: a group begun in step t is trained by step t + ceil(ratio) or given up, and
its tokens were generated at version t or later, so no trained token lags more than
ceil(ratio) steps (`staleness_bound`).

Harness readings: a "round" is a block of R/U steps (no rollout boundary, as for AReaL);
the run starts no group once every group it will train has started; ROLL's weight update
before step 0 is left out (the engine starts with the first weights). Left out: the
PromptAffinityRouter's pinning of a prompt's K requests to one replica (the simulator's
dispatch routes each request on its own); `is_use_additional_prompts` (extra prompts for
dynamic filtering, off by default: base_config.py:69-75) and the query filter.
"""

from __future__ import annotations

import math
from typing import Any

from harness.core.runtime import Group, Request, Response, Runtime
from systems.common import BatchCounter
from systems.interrupt import Interrupter
from systems.staleness_gate import CapacityGate

NO_GROUP_CAP = 1 << 30  # ROLL caps groups by the budget alone; requests by the router


def window(ratio: float) -> int:
    """Steps a group may wait to be trained: ceil(ratio) (G:349, G:416)."""
    return math.ceil(ratio)


def oldest_quota(ratio: float, batch: int, group_size: int) -> int:
    """Groups the oldest step of the window gives a batch when the ratio is fractional:
    int(frac x B x K) samples (G:370), in whole groups (G:139-143); all B when it is
    whole."""
    if ratio % 1 == 0:
        return batch
    return math.ceil(int(batch * group_size * (ratio % 1)) / group_size)


class Step:
    """The groups begun in one step: running ids, and committed groups in commit order
    (ROLL's ItemsGroup, G:81-147)."""

    def __init__(self) -> None:
        self.running: set[int] = set()
        self.done: list[Group] = []


class RollFlash:
    name = "roll-flash"
    summary = "ROLL Flash: per-sample requests, a ceil(ratio)-step window, abort-and-resume syncs"
    knobs: tuple[str, ...] = ("update_groups", "roll_flash.async_generation_ratio",
                              "roll_flash.max_running_requests")

    def __init__(self) -> None:
        self.batches = BatchCounter()

    def staleness_bound(self, cfg: Any) -> int | None:
        """ceil(ratio) steps: the window a group is trained in or given up (see above)."""
        return window(cfg.roll_flash.async_generation_ratio)

    def backlog_bound(self, cfg: Any) -> int:
        """The budget's samples: at most ceil(ratio x U) + U groups started and untrained
        (the gate, G:245-253), K samples each."""
        u = cfg.update_groups
        return (math.ceil(cfg.roll_flash.async_generation_ratio * u) + u) * cfg.group_size

    async def run(self, rt: Runtime) -> None:
        cfg, knobs = rt.config, rt.config.roll_flash
        ratio, u, k = knobs.async_generation_ratio, cfg.update_groups, cfg.group_size
        steps_per_round = cfg.groups // u
        total_steps = cfg.rounds * steps_per_round
        gate = CapacityGate(NO_GROUP_CAP, u, ratio)
        credits = rt.slots(rt.engine.replicas * knobs.max_running_requests)
        interrupter = Interrupter(rt, every_attempt=True)  # attempts wait for credits
        changed = rt.event()
        steps: dict[int, Step] = {}  # begun-in step -> its groups
        dropped: set[int] = set()
        state = {"started": 0, "round": 0, "step": 0, "over": 0}

        async def sample(group: Group, index: int) -> tuple[Response, float] | None:
            """One request to its end, sent again after each abort (None: given up)."""
            request = Request(group.round, group.id, index, group.prompt,
                              cfg.max_response_tokens)
            while True:
                async with credits:
                    if group.id in dropped:
                        return None
                    response = await interrupter.submit(rt, request)
                if group.id in dropped:
                    return None
                if response.status == "finished":
                    return response, await rt.verifier.score(response)
                request = request.continued(response)

        async def episode(group: Group, begun: int) -> None:
            results = await rt.gather(*(sample(group, i) for i in range(k)))
            if group.id in dropped:
                return
            group.responses = [r for r, _ in results]  # type: ignore[misc]
            group.rewards = [score for _, score in results]  # type: ignore[misc]
            rt.emit("group_complete", group=group.id, round=group.round)
            await rt.materialize(group)
            if group.id in dropped:
                return
            gate.accept()
            steps[begun].running.discard(group.id)
            steps[begun].done.append(group)
            changed.set()

        async def produce() -> None:
            while not state["over"]:
                if (state["started"] >= total_steps * u or gate.capacity(state["step"]) <= 0
                        or not interrupter.open.is_set()):
                    changed.clear()
                    await changed.wait()
                    continue
                (prompt,) = rt.workload.take(1)
                group = Group(rt.new_group_id(), state["round"], prompt)
                gate.submit()
                steps.setdefault(state["step"], Step()).running.add(group.id)
                rt.spawn(episode(group, state["step"]))
                state["started"] += 1

        def give_up(current: int) -> None:
            """ROLL's gc at the pause that ends step `current` (G:400-433): the groups of
            steps past the window are given up, and their prompts replaced. ROLL asserts
            none of them is finished and untaken (G:430); were one, it is dropped too."""
            for begun in [t for t in steps if t <= current - window(ratio)]:
                old = steps.pop(begun)
                for gid in old.running:
                    dropped.add(gid)
                    gate.drop()
                gate.accepted -= len(old.done)  # as if never begun, so they are replaced
                for gid in [*old.running, *(g.id for g in old.done)]:
                    state["started"] -= 1
                    rt.emit("decision", what="drop_group", group=gid, reason="stale",
                            step=begun)

        async def take(s: int) -> list[Group]:
            """ReplayBuffer.get_batch at step s (G:342-398)."""
            batch: list[Group] = []
            low = s - window(ratio)
            for t in sorted(steps):
                if t < low or len(batch) >= u:
                    continue
                want = u - len(batch)
                if t == low and t < s:
                    want = min(want, oldest_quota(ratio, u, k))
                one = steps[t]
                while len(one.done) < want and (one.running or t == s):
                    changed.clear()
                    await changed.wait()
                got, one.done[:want] = one.done[:want], []
                batch.extend(got)
            return batch

        producer = rt.spawn(produce())
        for s in range(total_steps):
            if s % steps_per_round == 0:
                state["round"] = interrupter.round = s // steps_per_round
                rt.emit("rollout_start", round=state["round"], version=rt.trainer.version)
            state["step"] = s
            steps.setdefault(s, Step())
            changed.set()
            await self.batches.train(rt, await take(s))
            if s + 1 < total_steps:  # step s + 1's pause_sampling and weight update
                give_up(s)
                await interrupter.update(rt)
            if (s + 1) % steps_per_round == 0:
                rt.emit("rollout_complete", round=state["round"])
        state["over"] = 1
        changed.set()
        await producer
