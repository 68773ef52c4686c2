"""verl's fully-async policy trainer: a Rollouter, a message queue and a Trainer on
their own GPUs, with a budget of stale samples per parameter sync.

Written from verl-project/verl@1dda039 (cited below as verl@1dda039), the files of
verl/experimental/fully_async_policy/ unless another path is named. verl's "sample" is
one prompt with its rollout.n responses (detach_utils.py:70 repeats the prompt n
times), so every count of samples below is a count of groups; ppo_mini_batch_size is
in prompts too (verl/trainer/ppo/ray_trainer.py:1352-1353 multiplies it by n), so a
mini-batch is U groups and one optimizer step (ppo_epochs 1, :1354).

- Rollouter. It starts one group at a time (gen_batch_size 1, fully_async_rollouter.py:
  352), each counted in `staleness_samples` as it is taken (:950-952), then waits for a
  free slot among `max_concurrent_samples` = min(replicas x
  concurrent_samples_per_replica, max_required_samples) groups in flight (:503-506,
  :970-978). It pauses while `staleness_samples` >= max_required_samples =
  int(U x require_batches x (1 + staleness_threshold) x trigger_parameter_sync_step)
  (:493-497, :1155), or while the queue holds that many (:507, :1147; never binding,
  as the queue is part of what `staleness_samples` counts). A finished group, its K
  responses scored as each ends (the agent reward loop, :835-839), goes to the queue
  (whose drop of its oldest sample when full, message_queue.py:68-72, never happens
  for the same reason).
- Trainer. It takes require_batches x U groups from the queue in arrival order
  (fully_async_trainer.py:157-159, :402-411; message_queue.py:100-101), then trains
  them as require_batches mini-batches of U groups (taken here in queue order; verl may
  reorder them to balance tokens across ranks), one optimizer step each. After
  trigger_parameter_sync_step such trainer steps it syncs the weights (:684-688,
  :700-701, :733-736) and resets `staleness_samples` to the groups in flight plus
  those queued (fully_async_rollouter.py:605, called at fully_async_trainer.py:756;
  a group taken before the sync and still waiting for a slot is in neither, so it
  starts uncounted, as in verl).
  So the rollouter starts at most max_required_samples - (stale groups) per sync:
  README.md:136-140's rollout_num = (1 + s) x trigger x require_batches x mini-batch -
  num_staleness_sample. A run that ends between syncs syncs once more (:529-530).
- The sync (verl/checkpoint_engine/base.py:505-556): abort every request in flight
  (:519, vLLM's pause_generation with abort: verl/workers/rollout/vllm_rollout/
  vllm_async_server.py:912-915, which also holds new requests until resume), transfer,
  resume generation (:556). Here: `engine.pause("abort")`, `trainer.publish()` (not in
  flight: the engine holds no running sequence then), `engine.resume()`.
- partial_rollout (verl/workers/rollout/llm_server.py:404-456): an aborted response is
  submitted again with its tokens (prompt + tokens, :408, the KV cache recomputed), so
  it continues under the new weights; here `Request(resume=partial)`, which the engine
  holds until `resume` and prefills again, prompt and tokens. Without it (:447-454) the
  aborted response ends there: nothing downstream drops it (no stop_reason check in
  verl/experimental/agent_loop/), so it is scored (a cut answer scores 0 here) and
  trained as cut. README.md:216-217 says mode 3 instead waits for the tasks in flight,
  and the commit that made partial_rollout stop the resubmission (5371b99, PR #6882)
  says such samples "should be dropped"; the code at 1dda039 aborts them and trains
  them, and this follows the code.

README.md:188-226's four modes are settings of these knobs: (1) on-policy pipeline,
trigger 1 and s = 0; (2) stream off-policy pipeline, trigger > 1 and s = 0; (3) async
stream pipeline with stale samples, s > 0 and partial_rollout off; (4) with partial
rollout, s > 0 and partial_rollout on. With s = 0 the rollouter starts exactly one
sync's groups per sync and nothing is in flight at a sync, so partial_rollout changes
nothing (README.md:149).

Choices of the harness: verl's sync before the first step (fully_async_main.py:109-110)
is left out (the engine starts with the first weights), as is the client's 1 s wait
before it resubmits an aborted request (llm_server.py:456). A "round" is a block of
R/U optimizer steps (R a multiple of require_batches x U: async_knobs.VerlAsync.check);
a group's round is the trainer's when it starts. The run starts rounds x R groups
(rollout.total_rollout_steps, fully_async_rollouter.py:405-407) and trains them all.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from harness.core.runtime import Group, Runtime
from systems.common import BatchCounter


def max_required_samples(cfg: Any) -> int:
    """Groups the rollouter may start per parameter sync, counting the stale ones:
    fully_async_rollouter.py:493-497, the same float arithmetic in the same order."""
    v = cfg.verl_async
    required = cfg.update_groups * v.require_batches
    return int(required * (v.staleness_threshold + 1) * v.trigger_parameter_sync_step)


def sync_window(cfg: Any) -> int:
    """Optimizer steps between two parameter syncs."""
    return cfg.verl_async.trigger_parameter_sync_step * cfg.verl_async.require_batches


@dataclass
class Loop:
    """What the fully-async loop shares with a rule laid over it (verl-dynamic's): the
    message queue, its counters and the wait for the queue or the rollouter to change."""

    queue: deque[Group]
    state: dict[str, int]  # staleness, round, queued (groups ever queued), ...
    wait: Callable[[], Awaitable[None]]
    changed: Any  # the runtime's Event the rollouter waits on


class VerlFullyAsync:
    name = "verl-fully-async"
    summary = "rollouter, queue and trainer apart; stale-sample budget per weight sync"
    knobs: tuple[str, ...] = (
        "update_groups", "verl_async.staleness_threshold",
        "verl_async.trigger_parameter_sync_step", "verl_async.require_batches",
        "verl_async.partial_rollout", "verl_async.concurrent_samples_per_replica")

    def __init__(self) -> None:
        self.batches = BatchCounter()

    @staticmethod
    def staleness_bound(cfg: Any) -> int | None:
        """The most optimizer steps a trained token lags, as the rule promises.

        A sync trains W = U x B x T groups and its budget is M (`max_required_samples`).
        With M = W (s = 0, or s x W < 1, as at the default s = 0.1 with W < 10) every
        group trained between two syncs started after the first and nothing is in
        flight at a sync: lag < one sync's steps, T x B. With M > W the rule counts
        stale groups, not versions: a group waits in the queue behind every group
        scored before it, so a slow reward check ages it without limit (measured: on
        rp-code, whose sandbox checks run to tens of seconds, a group cut at a sync
        is trained 4 steps after its version at W = 1, s = 1, where a quick check
        gives 2), and with partial rollout a response also continues across syncs for
        as long as it runs (the README's `max_partial_span`). No bound then.
        """
        if max_required_samples(cfg) == cfg.update_groups * sync_window(cfg):
            return sync_window(cfg) - 1
        return None

    async def before_fit(self, rt: Runtime, loop: Loop) -> None:
        """Before the trainer takes its groups (verl-dynamic reclaims its GPUs here)."""

    def collected(self, wait_s: float, waited: int) -> None:
        """The trainer took its groups after `wait_s` seconds, `waited` of them not yet
        queued when it asked (verl-dynamic's rate signal)."""

    async def before_sync(self, rt: Runtime, loop: Loop) -> None:
        """Before the weights go out (verl-dynamic decides whether to lend here)."""

    async def after_sync(self, rt: Runtime, loop: Loop) -> None:
        """After the weights reached the engine, before the stale groups are counted
        again (verl-dynamic lends the trainer's GPUs here)."""

    async def run(self, rt: Runtime) -> None:
        cfg, v = rt.config, rt.config.verl_async
        u, b = cfg.update_groups, v.require_batches
        steps_per_round = cfg.groups // u
        total = cfg.rounds * cfg.groups
        limit = max_required_samples(cfg)
        queue: deque[Group] = deque()  # the message queue, in arrival order
        active: set[int] = set()  # groups started and not yet queued
        state = {"staleness": 0, "round": 0, "queued": 0, "concurrency":
                 min(rt.engine.replicas * v.concurrent_samples_per_replica, limit)}
        changed = rt.event()

        async def produce(group: Group) -> None:
            """One verl sample: K responses, each scored as it ends, then queued."""
            await rt.serve(group, retry=v.partial_rollout)
            active.discard(group.id)
            queue.append(group)
            state["queued"] += 1
            changed.set()

        async def wait() -> None:
            changed.clear()
            await changed.wait()

        async def rollouter() -> None:
            started, said = 0, False
            while started < total:
                if state["staleness"] >= limit or len(queue) >= limit:
                    if not said:  # once per pause
                        said = True
                        rt.emit("decision", what="rollouter_pause",
                                staleness_samples=state["staleness"], limit=limit)
                    await wait()
                    continue
                said = False
                state["staleness"] += 1  # counted when taken, before a slot is free
                while len(active) >= state["concurrency"]:
                    await wait()
                (prompt,) = rt.workload.take(1)
                group = Group(rt.new_group_id(), state["round"], prompt)
                active.add(group.id)
                rt.spawn(produce(group))
                started += 1

        async def take(n: int) -> list[Group]:
            start, short = rt.now(), max(0, n - len(queue))
            while len(queue) < n:
                await wait()
            self.collected(rt.now() - start, short)
            return [queue.popleft() for _ in range(n)]

        loop = Loop(queue, state, wait, changed)

        async def sync() -> None:
            await self.before_sync(rt, loop)
            load = rt.engine.load()  # what the pause aborts: every request it holds
            await rt.engine.pause("abort")
            await rt.trainer.publish()
            await rt.engine.resume()
            await self.after_sync(rt, loop)
            state["staleness"] = len(active) + len(queue)
            rt.emit("decision", what="param_sync", version=rt.trainer.version,
                    aborted=load.running + load.waiting, staleness_samples=state["staleness"])
            changed.set()

        generator = rt.spawn(rollouter())
        fit_steps = total // (b * u)
        for fit in range(fit_steps):
            if fit * b % steps_per_round == 0:
                state["round"] = fit * b // steps_per_round
                rt.emit("rollout_start", round=state["round"], version=rt.trainer.version)
            await self.before_fit(rt, loop)
            groups = await take(b * u)
            for i in range(b):
                await self.batches.train(rt, groups[i * u:(i + 1) * u])
            if (fit + 1) % v.trigger_parameter_sync_step == 0:
                await sync()
            if (fit + 1) * b % steps_per_round == 0:
                rt.emit("rollout_complete", round=state["round"])
        if fit_steps % v.trigger_parameter_sync_step:
            await sync()
        await generator
