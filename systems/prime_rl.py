"""prime-rl's orchestrator (PrimeIntellect-ai/prime-rl@559b447).

Rules, from src/prime_rl/orchestrator/ unless named otherwise:

- Episodes (one sample each) are dispatched one at a time against a permit
  count, the in-flight cap of the concurrency controller
  (systems/prime_rl_concurrency.py); an open group's remaining episodes go
  before a new group (dispatcher.py:441-462); a group records the engines'
  policy version when it opens (:481-489). Net growth of the pool is metered:
  at most max(K, cap // 10) admissions a 5 s window, a natural completion
  refunding one (:188-197, :280-287, :555-561).
- The async barrier: with `progress.step` the batch being collected (1-based),
  new episodes are dispatched only while (step - 1) - version <= L, and batch
  `step` ships only once the engines hold version >= step - 1 - L, the main loop
  waiting meanwhile (orchestrator.py:101-104, :662-679, :970-994). L =
  `max_async_level`: 1, a fixed invariant at 559b447 (its knob was removed in
  e792f9cf8, whose parent had it with default 1).
- `max_off_policy_steps` M: when the trainer publishes a version, groups still
  generating whose dispatch version is below (step - 1) - M are cancelled
  (dispatcher.py:367-399, utils.py:51-54); before every batch is cut, finished
  groups waiting in the batch are swept by the same rule (train_sink.py:158-206):
  this sweep is the guarantee. Batch `step` trains on version step - 1, so no
  token is trained more than M steps after its group's dispatch version (and no
  token is older than that): `staleness_bound` = M.
- A batch is the first U x K samples in arrival order (train_sink.py:340-353);
  with whole groups of K, the first U groups finished. The trainer trains each
  shipped batch, steps, and the weights are installed in flight.
- At the end, episodes still in flight are cancelled (dispatcher.py:360-365); the
  finished groups no batch took are never trained.

Dropped groups are recorded as `drop_group` with reason stale, overload
(the controller's cut), or run end: every group opened is trained once or dropped
once, whether it was still generating, being scored, or finished and waiting for
a batch. A "round" is a block of R/U steps; an episode belongs to the round in which
it is dispatched (a group opened near a round's end may dispatch its last episodes
after that round's `rollout_complete`: they are the next round's).

Placement: disaggregated only. The launcher gives inference the first
`num_infer_gpus` GPUs and the trainer the next `num_train_gpus`
(src/prime_rl/entrypoints/rl.py:130-148; a single node must hold their sum:
packages/prime-rl-configs/src/prime_rl/configs/rl.py:177-194; a multi-node run has
train nodes and inference nodes apart, :197-207), so a colocated run is refused
(harness/run/checks.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.core.runtime import Group, Handle, Queue, Request, Response, Runtime
from systems.common import BatchCounter
from systems.prime_rl_concurrency import POLL_S, ConcurrencyController

WINDOW_S = 5.0


@dataclass
class _Open:
    group: Group
    version: int  # the engines' policy version when the group opened
    to_schedule: int
    started: float = 0.0
    live: dict[str, Handle[Response]] = field(default_factory=dict)
    scores: dict[int, Handle[float]] = field(default_factory=dict)  # by sample
    dropped: bool = False


class PrimeRL:
    name = "prime-rl"
    summary = "prime-rl: episodes under an adaptive cap, a one-step barrier, stale groups cancelled"
    placements = ("disaggregated",)
    placement_why = ("prime-rl's launcher runs inference and trainer on separate GPUs, "
                     "PrimeIntellect-ai/prime-rl@559b447:src/prime_rl/entrypoints/rl.py:130-148")
    knobs: tuple[str, ...] = ("update_groups", "prime_rl.max_off_policy_steps",
                              "prime_rl.max_async_level", "prime_rl.initial_inflight",
                              "prime_rl.min_inflight", "prime_rl.max_inflight")

    def __init__(self) -> None:
        self.batches = BatchCounter()

    def staleness_bound(self, cfg: Any) -> int | None:
        return int(cfg.prime_rl.max_off_policy_steps)

    async def run(self, rt: Runtime) -> None:  # noqa: C901 - one orchestrator, read top-down
        cfg, pr = rt.config, rt.config.prime_rl
        k, u = cfg.group_size, cfg.update_groups
        steps_per_round = cfg.groups // u
        total_steps = cfg.rounds * steps_per_round
        changed = rt.event()
        groups: dict[int, _Open] = {}  # opened, not yet finished or dropped
        unshipped: dict[int, _Open] = {}  # opened, not yet shipped or dropped: what run end drops
        finished: Queue[_Open] = rt.queue()
        shipped: Queue[list[Group]] = rt.queue()
        s: dict[str, Any] = {"step": 1, "inflight": 0, "window": 0.0, "admitted": 0,
                             "over": False, "round": 0}

        def drop(g: _Open, reason: str) -> None:
            if g.dropped:
                return
            g.dropped = True
            groups.pop(g.group.id, None)
            unshipped.pop(g.group.id, None)
            rt.emit("decision", what="drop_group", group=g.group.id, reason=reason)
            s["inflight"] -= len(g.live)  # aborted episodes free their permits, refund nothing
            rt.spawn(rt.engine.abort(list(g.live)))
            g.live.clear()
            changed.set()

        def cancel_youngest(n: int) -> None:
            shed = 0
            for g in sorted(groups.values(), key=lambda g: -g.started):
                if shed >= n:
                    break
                shed += len(g.live)
                drop(g, "overload")

        ctl = ConcurrencyController(pr.initial_inflight, pr.min_inflight, pr.max_inflight,
                                    rt.now, lambda: s["inflight"], cancel_youngest,
                                    cfg.max_response_tokens)

        def gate_open() -> bool:
            return (s["step"] - 1) - rt.engine.version <= pr.max_async_level

        def budget() -> int:
            if rt.now() - s["window"] >= WINDOW_S:
                s["window"], s["admitted"] = rt.now(), 0
            return max(k, ctl.limit // 10) - s["admitted"]

        async def episode(g: _Open, req: Request, future: Handle[Response]) -> None:
            response = await future
            if g.dropped or req.id not in g.live:
                return
            del g.live[req.id]
            s["inflight"] -= 1
            s["admitted"] = max(0, s["admitted"] - 1)
            ctl.record_episode(response.tokens)
            sample = req.sample
            g.group.responses.append(response)
            g.scores[sample] = rt.spawn(rt.verifier.score(response))
            changed.set()
            if len(g.group.responses) == k:
                g.group.responses.sort(key=lambda r: r.request.sample)
                rt.emit("group_complete", group=g.group.id, round=g.group.round)
                g.group.rewards = [await g.scores[i] for i in range(k)]
                if not g.dropped:
                    groups.pop(g.group.id, None)
                    await rt.materialize(g.group)
                    finished.put_nowait(g)

        async def dispatch() -> None:
            while s["step"] <= total_steps:
                if not (s["inflight"] < ctl.limit and budget() > 0 and gate_open()):
                    changed.clear()
                    await changed.wait()
                    continue
                g = next((g for g in groups.values() if g.to_schedule > 0), None)
                if g is None:
                    (prompt,) = rt.workload.take(1)
                    g = _Open(Group(rt.new_group_id(), s["round"], prompt), rt.engine.version,
                              k, rt.now())
                    groups[g.group.id] = unshipped[g.group.id] = g
                sample = k - g.to_schedule
                g.to_schedule -= 1
                s["inflight"] += 1
                s["admitted"] += 1
                # this round's, not the group's: round r is over once its rollout_complete
                # is written, and an episode dispatched later is the next round's work
                req = Request(s["round"], g.group.id, sample, g.group.prompt,
                              cfg.max_response_tokens)
                g.live[req.id] = future = rt.engine.submit(req)  # now, under the gate
                rt.spawn(episode(g, req, future))

        async def poll() -> None:
            while s["step"] <= total_steps:
                ctl.observe(rt.engine.load())
                changed.set()
                await rt.sleep(POLL_S)

        def min_fresh() -> int:
            return (s["step"] - 1) - pr.max_off_policy_steps

        async def collect() -> None:
            pending: list[_Open] = []
            while s["step"] <= total_steps:
                pending.append(await finished.get())
                for g in [g for g in pending if g.version < min_fresh()]:
                    drop(g, "stale")
                pending = [g for g in pending if not g.dropped]
                if len(pending) < u:
                    continue
                batch, pending = pending[:u], pending[u:]
                while rt.engine.version < s["step"] - 1 - pr.max_async_level:
                    changed.clear()
                    await changed.wait()
                rt.emit("decision", what="ship_batch", step=s["step"],
                        groups=[g.group.id for g in batch])
                for g in batch:
                    unshipped.pop(g.group.id)
                shipped.put_nowait([g.group for g in batch])
                s["step"] += 1
                changed.set()

        tasks = [rt.spawn(dispatch()), rt.spawn(poll()), rt.spawn(collect())]
        for step in range(total_steps):
            if step % steps_per_round == 0:
                s["round"] = step // steps_per_round
                rt.emit("rollout_start", round=s["round"], version=rt.trainer.version)
            await self.batches.train(rt, await shipped.get())
            for g in [g for g in groups.values() if g.version < min_fresh()]:
                drop(g, "stale")
            await rt.trainer.publish(in_flight=True)
            changed.set()
            if (step + 1) % steps_per_round == 0:
                rt.emit("rollout_complete", round=s["round"])
        for g in list(unshipped.values()):  # in flight, being scored, or waiting for a batch
            drop(g, "run end")
        changed.set()
        await tasks[0]
        for task in tasks[1:]:  # the poll's timer and the idle sink: nothing left to do
            task.cancel()
