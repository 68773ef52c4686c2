"""RollPacker: tail batching for synchronous RL, with its three helpers.

Each component can be switched off (config `rollpacker_*` fields), so Table 2's
cumulative breakdown can be rebuilt; with all four off this is veRL.

- Tail batching: a short round launches ceil(eta x P0) prompts with
  ceil(eta x R0) responses each; a prompt is done when its first R0 responses
  are, the round when P0 prompts are; everything else is aborted and its
  prompts wait in a long-prompt queue (they restart from scratch, so training
  stays on-policy). A prompt complete after the P0-th (in the same instant, or
  still being scored) is surplus: its group is dropped with that reason and its
  prompt deferred too (Sec. 6.3: "the remaining prompts" go to the queue). When
  the queue holds P0 prompts the next round is a long round over them, without
  speculation.
- Reward scheduler: rewards are computed as each response finishes,
  overlapping the rollout, and sandboxed code gets an adaptive timeout
  T = min(max(Tmin, lambda x Tanchor), Tmax), Tanchor being the longest run of
  a correct response to the same prompt so far. Without it, rewards are a
  separate stage after the rollout. The paper (Sec. 4.3: "For each test case, it
  tracks the maximum execution time among correct responses during training")
  leaves open how long an anchor lives; `rollpacker_anchor` runs both readings:
  `run`, a prompt's anchor kept across steps for the whole run (a prompt deferred
  to a long round keeps what its short round learnt), and `step`, every step
  starting with no anchor. The authors' code is not public (ROLL@8eb27cc2 has no
  RollPacker code; its sandbox worker has a fixed timeout,
  roll/pipeline/rlvr/rewards/code_sandbox_reward_worker.py:93, DEFAULT_TIMEOUT = 30).
- Parallelism planner: after a round whose preemptions rose by more than 5%
  the engine's tensor-parallel size doubles (up to 8, one server); after four
  rounds without preemptions it halves, but never below the size the run
  started with (the offline profile's choice: below it the weights would leave
  too little KV cache, e.g. a 32B model on one 80 GB GPU).
- Stream trainer: once 20-50% of the round's responses are done (the first
  5% milestone at which half the engine replicas could hold the running
  sequences, or a fixed `rollpacker_stream_at`), half the rollout GPUs leave
  the engine and compute gradients of completed prompts while the rest
  generate; the optimizer step still waits for the whole rollout.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

from harness.core.runtime import AdaptiveTimeout, Group, Handle, Prompt, Queue, Runtime
from systems.common import BatchCounter

T_MIN, T_MAX, LAMBDA = 2.0, 30.0, 1.5
MILESTONES = [0.20 + 0.05 * i for i in range(7)]  # 20%, 25%, ... 50%


class RollPacker:
    name = "rollpacker"
    summary = "tail batching, async rewards with adaptive timeouts, TP planner, stream trainer"
    knobs: tuple[str, ...] = (
        "update_groups", "rollpacker_tail_batching", "rollpacker_speculation",
        "rollpacker_response_speculation", "rollpacker_reward_scheduler", "rollpacker_planner",
        "rollpacker_stream_trainer", "rollpacker_stream_at", "rollpacker_anchor")

    def __init__(self) -> None:
        self.batches = BatchCounter()
        self.long_queue: list[Prompt] = []
        # the reward scheduler's sandbox rule; its anchors, prompt index -> longest
        # correct check (s), are kept across rounds (the `run` reading)
        self.sandbox = AdaptiveTimeout(T_MIN, T_MAX, LAMBDA, _is_sandbox)
        self.default_tp = 0  # the offline-profiled TP: the planner does not go below it
        self.preempt_history: list[int] = []

    def staleness_bound(self, cfg: Any) -> int | None:
        """0 steps: one update per round on the round's own groups; a prompt aborted
        to the long queue restarts from scratch."""
        return 0

    def backlog_bound(self, cfg: Any) -> int | None:
        """Tail batching launches ceil(eta_P x R) prompts of ceil(eta_R x K) responses,
        more than a round trains: its backlog is held to that launch (None without it:
        the staleness bound's (L + 1) x G x K of `rolloutbench check`)."""
        if not cfg.rollpacker_tail_batching:
            return None
        return (math.ceil(cfg.rollpacker_speculation * cfg.groups)
                * math.ceil(cfg.rollpacker_response_speculation * cfg.group_size))

    # -- a round ------------------------------------------------------------
    async def run(self, rt: Runtime) -> None:
        for rnd in range(rt.config.rounds):
            if rt.config.rollpacker_anchor == "step":  # the "fresh anchor" reading
                self.sandbox.anchor.clear()
            await self._plan_parallelism(rt)
            rt.emit("rollout_start", round=rnd, version=rt.engine.version)
            await self._round(rt, rnd)
            await rt.trainer.publish()

    # -- hooks a subclass may override (systems.cgp_tail) ------------------------
    def _rewards_as_responses_finish(self, rt: Runtime) -> bool:
        """Score each response as it finishes (else: a reward stage after the rollout)."""
        return bool(rt.config.rollpacker_reward_scheduler)

    def _streams(self, rt: Runtime) -> bool:
        """Whether the stream trainer takes half the rollout GPUs mid-rollout."""
        return bool(rt.config.rollpacker_stream_trainer)

    def _ready(self, rt: Runtime, group: Group) -> None:
        """One of the round's P0 kept groups is done (materialised when rewards come
        as responses finish). RollPacker trains them after the rollout; a subclass
        may hand it on at once."""

    async def _round(self, rt: Runtime, rnd: int) -> None:
        cfg = rt.config
        ready, stream, streamer = await self._rollout(rt, rnd)
        streamed: list[Group] = []
        if streamer is not None:  # the rest goes to all GPUs, not to the stream
            self.stream_open = False
            stream.put_nowait(None)
            streamed = await streamer
            await rt.engine.resize(0)  # every replica back for the next rollout
        gone = {g.id for g in streamed}  # by id: a scan of `streamed` per group is n squared
        rest = [g for g in ready if g.id not in gone]
        for i in range(0, len(rest), cfg.update_groups):
            await self.batches.dispatch(rt, rest[i : i + cfg.update_groups])
        await rt.trainer.step()  # one update for the whole rollout: on-policy

    async def _rollout(self, rt: Runtime, rnd: int
                       ) -> tuple[list[Group], Queue[Group | None], Handle[list[Group]] | None]:
        """A short or long round's rollout, up to and including rollout_complete:
        the P0 kept groups, and the stream trainer's queue and task if it started."""
        cfg = rt.config
        p0, r0 = cfg.groups, cfg.group_size
        tail = cfg.rollpacker_tail_batching
        eta_p = cfg.rollpacker_speculation if tail else 1.0
        eta_r = cfg.rollpacker_response_speculation if tail else 1.0
        if tail and len(self.long_queue) >= p0:
            prompts, self.long_queue = self.long_queue[:p0], self.long_queue[p0:]
            n_resp, kind = r0, "long"
        else:
            prompts = rt.workload.take(math.ceil(eta_p * p0))
            n_resp = math.ceil(eta_r * r0)
            kind = "short" if len(prompts) > p0 or n_resp > r0 else "standard"
        rt.emit("decision", what=f"{kind}_round", prompts=len(prompts), responses=n_resp)
        groups = [Group(rt.new_group_id(), rnd, p) for p in prompts]
        done: Queue[Group] = rt.queue()
        # a prompt is done when its first R0 responses are (the rest aborted); scored
        # as each finishes, sandboxes under the adaptive timeout, with the scheduler
        timeout = self.sandbox if cfg.rollpacker_reward_scheduler else None
        tasks = [rt.spawn(rt.serve(g, n=n_resp, keep=r0, timeout=timeout,
                                   score=self._rewards_as_responses_finish(rt)))
                 for g in groups]
        for task in tasks:
            task.add_done_callback(partial(_hand_on, done))
        ready: list[Group] = []
        stream: Queue[Group | None] = rt.queue()
        streamer: Handle[list[Group]] | None = None
        while len(ready) < p0:
            ready.append(await done.get())
            self._ready(rt, ready[-1])
            if self._streams(rt) and streamer is None:
                released = await self._maybe_release(rt, len(ready) / p0)
                if released:
                    streamer = rt.spawn(self._stream(rt, stream, released))
                    for group in ready:
                        stream.put_nowait(group)
            elif streamer is not None:
                stream.put_nowait(ready[-1])
        stopped = {g.id for g, t in zip(groups, tasks, strict=True) if not t.done()}
        await rt.engine.abort([f"{g.id}.{s}" for g in groups if g.id in stopped
                               for s in range(n_resp)])
        await rt.gather(*tasks)
        surplus = self._surplus(rt, done)
        # "We collect the first P0 prompts and drops the remaining prompts ... to the
        # long-prompt queue" (Sec. 6.3), and "no prompt is permanently excluded" (Sec.
        # 3): a surplus prompt goes there too, restarting from scratch (on-policy)
        self.long_queue += [g.prompt for g in groups if g.id in stopped or g.id in surplus]
        if not self._rewards_as_responses_finish(rt):  # a separate reward stage
            rt.emit("decision", what="reward_stage", round=rnd)
            scores = [[rt.spawn(rt.verifier.score(r)) for r in g.responses] for g in ready]
            for group, group_scores in zip(ready, scores, strict=True):
                group.rewards = [await s for s in group_scores]
            await rt.gather(*(rt.materialize(g) for g in ready))
        rt.emit("rollout_complete", round=rnd)
        return ready, stream, streamer

    @staticmethod
    def _surplus(rt: Runtime, done: Queue[Group]) -> set[int]:
        """The groups that completed after the round's P0 were kept: in the instant
        the P0-th was taken (several prompts finishing in one engine step, all at the
        cap or of equal length), or scoring when the round was cut (a complete
        group waits for its rewards before it counts). None is trained (the batch is
        P0, and next round it would be a step stale), so each is dropped with its
        reason, and its prompt deferred by the caller."""
        surplus: set[int] = set()
        while not done.empty():
            group = done.get_nowait()
            surplus.add(group.id)
            rt.emit("decision", what="drop_group", group=group.id,
                    reason="surplus: complete after the round's P0 prompts; prompt "
                           "deferred to the long-prompt queue")
        return surplus

    # -- stream trainer -------------------------------------------------------
    async def _maybe_release(self, rt: Runtime, progress: float) -> int:
        """Hand half the rollout GPUs to the trainer when the criteria hold."""
        cfg = rt.config
        if cfg.rollpacker_stream_at > 0:
            due = progress >= cfg.rollpacker_stream_at
        else:  # adaptive: a 5% milestone in 20-50% at which half the replicas fit
            load = rt.engine.load()
            due = (any(abs(progress - m) < 0.5 / cfg.groups for m in MILESTONES)
                   and load.waiting == 0 and 2 * load.kv_used <= 0.9)
        if not due or progress > 0.5 or rt.engine.replicas < 2:
            return 0
        return await rt.engine.resize(rt.engine.replicas // 2)

    async def _stream(self, rt: Runtime, stream: Queue[Group | None],
                      gpus: int) -> list[Group]:
        """Gradients of completed prompts on the released GPUs, no update yet."""
        streamed: list[Group] = []
        self.stream_open = True
        while self.stream_open and (group := await stream.get()) is not None:
            if not group.advantages:  # rewards come later without the reward scheduler
                continue
            await self.batches.dispatch(rt, [group], gpus=gpus)
            streamed.append(group)
        return streamed

    async def _plan_parallelism(self, rt: Runtime) -> None:
        if not rt.config.rollpacker_planner:
            return
        load = rt.engine.load()
        self.default_tp = self.default_tp or load.tp
        self.preempt_history.append(load.preemptions)
        h = self.preempt_history
        if len(h) < 3:
            return
        this, before = h[-1] - h[-2], h[-2] - h[-3]
        tp = load.tp
        if this > 1.05 * before and this > 0 and tp < 8 and load.gpus % (tp * 2) == 0:
            await rt.engine.reconfigure(tp * 2)
        elif (len(h) >= 5 and all(h[-i] == h[-i - 1] for i in range(1, 5))
              and tp > self.default_tp):
            await rt.engine.reconfigure(tp // 2)


def _is_sandbox(prompt: Prompt) -> bool:
    return getattr(prompt.hidden, "kind", "local") == "sandbox"


def _hand_on(done: Queue[Group], task: Handle[Group | None]) -> None:
    """A served group that came back complete goes on the round's queue (not one the
    round aborted first, None, nor one cancelled as the run ends)."""
    if not task.cancelled() and task.exception() is None and (group := task.result()):
        done.put_nowait(group)
