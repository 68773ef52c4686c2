"""slime fully-async: a fixed pool of groups in flight across rollout boundaries.

Written from THUDM/slime@624b824 (cited below as slime@624b824): the example
`examples/fully_async/` (README.md:3-5, 44-75) runs `train_async.py` with the
rollout function `slime.rollout.fully_async_rollout.generate_rollout_fully_async`.

- The pool (slime/rollout/fully_async_rollout.py:131-171): a background worker polls
  every second (:91, 171) and, while fewer than C groups are in flight and fewer than
  C complete groups wait to be collected, takes the next group from the data buffer
  (requeued groups first, then new prompts: slime/rollout/data_source.py:177-196,
  225-229) and starts it. C = `sglang_server_concurrency` x engines (:59), and the
  same C bounds the samples generating at once (a semaphore around each generation:
  slime/rollout/sglang_rollout.py:94, 245-262). Each sample is scored as it finishes
  (:264-289).
- A rollout (fully_async_rollout.py:211-266) collects the next R complete groups in
  the order they completed and trains them sorted by prompt index (:251-259); its
  R x K samples make R/U optimizer steps of U groups.
- The loop (train_async.py:32-70): rollout r+1 is collected while rollout r trains;
  every `update_weights_interval` rollouts, it first waits for rollout r+1 to be
  collected, then updates the weights. The update pauses the engines, aborting
  every request in flight (systems/interrupt.py): train_async.py:11 refuses a
  colocated run, so the updater is the distributed one (slime/backends/megatron_utils/
  actor.py:168-175), whose update pauses and flushes the engines and continues them
  after the transfer (update_weight/update_weight_from_distributed.py:111-112, 134).
  A group with an aborted sample goes back to the data buffer whole
  (fully_async_rollout.py:199-205), is taken again before new prompts, and its
  finished samples are kept while the aborted ones go on from their prefix
  (sglang_rollout.py:42-61, 160-166, 235-240). The example's README says such a
  group "starts over" (README.md:82-83); the code it runs continues the prefix, and
  that is what runs here.

Nothing bounds how stale a collected group may be: the worker ignores policy
versions (fully_async_rollout.py:17-23; THUDM/slime#1800 "no staleness/version
control"), and a complete group may wait in the queue of up to C groups for many
rollouts. `staleness_bound` is None.

Harness readings (choices): the collector takes a group the moment it completes
(slime polls every 0.05 s, :236-237); no new prompt starts once every group the run
will train has started, so nothing is left over at the end (slime's worker runs
until the process exits); a "round" is one iteration of train_async's loop, from
the start of training rollout r to the end of its weight update, and every attempt is
the work of the round under way when it is sent (a requeued sample goes on, resumed or
afresh, in the round after the update that aborted it), as AReaL's resumed attempts
are: a round is over once its rollout_complete is written (`Interrupter.round`).
"""

from __future__ import annotations

from typing import Any

from harness.core.runtime import Group, Handle, PartialGroup, Runtime
from systems.common import BatchCounter
from systems.interrupt import Interrupter

POLL_S = 1.0  # the worker's top-up period (fully_async_rollout.py:91, 171)


class SlimeAsync:
    name = "slime-async"
    summary = "a pool of C groups in flight across rollouts; abort and requeue at updates"
    placements = ("disaggregated",)
    placement_why = ("slime's train_async.py:11 asserts a non-colocated run, "
                     "THUDM/slime@624b824")
    knobs: tuple[str, ...] = ("update_groups", "slime_async.sglang_server_concurrency",
                              "slime_async.update_weights_interval")

    def __init__(self) -> None:
        self.batches = BatchCounter()
        self.requeued = 0  # groups sent back to the buffer by an abort

    def staleness_bound(self, cfg: Any) -> int | None:
        """None: nothing in slime's fully-async path bounds staleness."""
        return None

    async def run(self, rt: Runtime) -> None:
        cfg = rt.config
        r, u, k = cfg.groups, cfg.update_groups, cfg.group_size
        pool = cfg.slime_async.sglang_server_concurrency * rt.engine.replicas
        semaphore = rt.slots(pool)
        changed = rt.event()
        # every attempt is the round under way's work when sent: a requeued sample goes
        # on in a later round than its group's, and a prefix of the trace calls a round
        # final once its rollout_complete is written and the next round has started
        self.interrupter = Interrupter(rt, every_attempt=True)
        buffer: list[PartialGroup] = []  # aborted groups, taken first (pop_first)
        output: list[Group] = []  # complete, not yet collected, in completion order
        state = {"active": 0, "new": 0, "round": 0}

        async def in_pool(work: PartialGroup) -> None:
            """`generate_and_rm_group` on the unfinished samples, each attempt holding a
            place of the semaphore and sent through the interrupter's gate."""
            await rt.serve(work.group, resume=work, gate=self.interrupter, slots=semaphore,
                           materialize=False)
            state["active"] -= 1
            if len(work.done) < k:  # an update aborted a sample: back to the buffer
                self.requeued += 1
                buffer.append(work)
                return
            await rt.materialize(work.group)
            output.append(work.group)
            changed.set()

        async def worker() -> None:
            while True:
                while state["active"] < pool and len(output) < pool:
                    if buffer:
                        work = buffer.pop(0)
                    elif state["new"] < cfg.rounds * r:
                        (prompt,) = rt.workload.take(1)
                        work = PartialGroup(Group(rt.new_group_id(), state["round"], prompt))
                        state["new"] += 1
                    else:
                        break
                    state["active"] += 1
                    rt.spawn(in_pool(work))
                await rt.sleep(POLL_S)

        async def collect() -> list[Group]:
            got: list[Group] = []
            while len(got) < r:
                if output:
                    got.append(output.pop(0))
                    continue
                changed.clear()
                await changed.wait()
            return sorted(got, key=lambda g: g.prompt.index)

        rt.spawn(worker())
        pending: Handle[list[Group]] | None = rt.spawn(collect())
        data: list[Group] = []
        for rnd in range(cfg.rounds):
            state["round"] = self.interrupter.round = rnd  # before a wait for its groups
            if pending is not None:
                data = await pending
            pending = rt.spawn(collect()) if rnd + 1 < cfg.rounds else None
            rt.emit("rollout_start", round=rnd, version=rt.trainer.version)
            for i in range(0, r, u):
                await self.batches.train(rt, data[i:i + u])
            if (rnd + 1) % cfg.slime_async.update_weights_interval == 0:
                if pending is not None:  # "sync generate before update weights"
                    data = await pending
                    pending = None
                await self.interrupter.update(rt)
            rt.emit("rollout_complete", round=rnd)
