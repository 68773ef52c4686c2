"""APRIL: active partial rollouts (slime's `--partial-rollout` with over-sampling).

Each round keeps `over_sampling_groups` groups in flight and stops as soon as
`groups` (slime's rollout batch size) of them are complete: the rest are
aborted. With `partial_rollout` their partial responses (tokens and policy
versions) and any finished samples are kept and resumed first in the next
round, ahead of new prompts; without it they are discarded. The complete
groups make one optimizer step per round (global batch = R x K samples).

`dynamic_sampling` is DAPO's filter: a group whose K rewards are all equal
carries no signal and is dropped, and a new group takes its place, up to
`MAX_SAMPLING_BATCHES` over-sampling batches a round; past that limit a
zero-variance group is trained when the round would otherwise fall short.
With `over_sampling_groups` = R (or 0) and no partial rollout, this is the standard
synchronous baseline. Unset, `over_sampling_groups` is the paper's 2R (its runs:
`over_sampling_batch_size=64` for `rollout_batch_size=32`), with partial rollout on,
so `--system april` alone runs APRIL as published.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from harness.core.runtime import Group, Request, Response, Runtime
from systems.common import BatchCounter

RESUME_FIRST = -1  # priority of resumed samples: ahead of new prompts
PAPER_OVER_SAMPLING = 2  # N' = 2R: the paper's over_sampling_batch_size (64 for R = 32)


def over_sampling_groups(cfg: Any) -> int:
    """N', the groups in flight per round: the config's (0 means R: none), or the
    paper's 2R when unset."""
    if cfg.over_sampling_groups is None:
        return PAPER_OVER_SAMPLING * cfg.groups
    return max(cfg.over_sampling_groups, cfg.groups)

MAX_SAMPLING_BATCHES = 10
"""Dynamic sampling's limit: a round draws at most this many over-sampling batches
of prompts (`max(over_sampling_groups, groups)` groups each, the first, carried
groups included, counts as one), so at most `(MAX_SAMPLING_BATCHES - 1) x over`
new groups replace dropped ones. DAPO bounds its redraws the same way (verl's
`algorithm.filter_groups.max_num_gen_batches`, 10 in the DAPO recipe). Without a
limit a round whose groups all score alike (every response cut off by a short
`max_response_tokens` scores 0) never ends. Past the limit the round goes on with
what it has, as slime's `check_reward_nonzero_std_with_fallback` does: a
zero-variance group is still dropped while the groups in flight could fill the
round without it, and otherwise trained, so each round still trains R groups. It
is recorded as a `redraw_limit` decision (once a round) and a `keep_group`
decision per zero-variance group kept. (verl instead stops the run with an error.)
Not a RunConfig field: harness/core/config.py is shared by every system, and no run
in this repository comes near the limit."""


@dataclass
class _Work:
    """A group in progress: finished samples with rewards, and partial ones."""

    group: Group
    done: dict[int, tuple[Response, float]] = field(default_factory=dict)
    partial: dict[int, Response] = field(default_factory=dict)


class APRIL:
    name = "april"
    summary = "over-sample groups, stop at R complete, resume the partial rest next round"
    # The config fields this system reads beyond the shared ones (harness.run.knob_check
    # refuses the others). U is not among them: a round trains its R groups in one step.
    knobs: tuple[str, ...] = ("over_sampling_groups", "partial_rollout", "dynamic_sampling")

    @staticmethod
    def paper_defaults(cfg: Any) -> None:
        """Fill the unset knobs with the paper's settings (the trace header shows them)."""
        if cfg.over_sampling_groups is None:
            cfg.over_sampling_groups = over_sampling_groups(cfg)

    def __init__(self) -> None:
        self.batches = BatchCounter()
        self.carried: list[_Work] = []
        self.spare: list[Group] = []  # complete groups beyond R: trained next round

    async def _serve(self, rt: Runtime, work: _Work, resumed: bool) -> bool:
        """Run the group's unfinished samples; True when all K are done and
        scored, False when the round stopped it first."""
        cfg = rt.config
        group = work.group
        todo = [s for s in range(cfg.group_size) if s not in work.done]
        futures = {
            s: rt.engine.submit(Request(group.round, group.id, s, group.prompt,
                                        cfg.max_response_tokens,
                                        RESUME_FIRST if resumed else 0,
                                        resume=work.partial.pop(s, None)))
            for s in todo
        }
        complete = True
        for s, future in futures.items():
            response = await future
            if response.status == "aborted":
                complete = False
                if response.tokens > 0:
                    work.partial[s] = response
            else:
                work.done[s] = (response, await rt.verifier.score(response))
        if not complete:
            return False
        group.responses = [work.done[s][0] for s in range(cfg.group_size)]
        group.rewards = [work.done[s][1] for s in range(cfg.group_size)]
        rt.emit("group_complete", group=group.id, round=group.round)
        await rt.materialize(group)
        return True

    def _ready(self, rt: Runtime, group: Group) -> None:
        """A group has joined the round's R trainable groups. Nothing to do here (the
        round trains them all at its end); a subclass may hand it on at once."""

    async def run(self, rt: Runtime) -> None:
        for rnd in range(rt.config.rounds):
            rt.emit("rollout_start", round=rnd, version=rt.engine.version)
            ready = await self._rollout(rt, rnd)
            rt.emit("rollout_complete", round=rnd)
            await self.batches.train(rt, ready)
            await rt.trainer.publish()

    async def _rollout(self, rt: Runtime, rnd: int) -> list[Group]:
        """One round: over-sample, stop at R complete groups, keep or drop the rest."""
        cfg = rt.config
        over = over_sampling_groups(cfg)
        ready: list[Group] = self.spare[: cfg.groups]
        self.spare = self.spare[cfg.groups :]
        for group in ready:
            self._ready(rt, group)
        finished = asyncio.Event()
        stopped: list[_Work] = []
        if len(ready) == cfg.groups:
            finished.set()
        live: dict[asyncio.Task[bool], _Work] = {}
        redraws = (MAX_SAMPLING_BATCHES - 1) * over  # dynamic sampling's budget

        def launch(work: _Work, resumed: bool) -> None:
            task = rt.spawn(self._serve(rt, work, resumed))
            live[task] = work
            task.add_done_callback(on_done)

        def on_done(task: asyncio.Task[bool]) -> None:
            nonlocal redraws
            work = live.pop(task)
            if task.cancelled() or task.exception() is not None:
                return
            if not task.result():  # stopped by the abort: resume it next round
                stopped.append(work)
                return
            if cfg.dynamic_sampling and len(set(work.group.rewards)) == 1:
                if len(ready) >= cfg.groups:  # not needed: drop it
                    rt.emit("decision", what="drop_group", group=work.group.id)
                    return
                if redraws > 0:  # drop it and draw a new group in its place
                    rt.emit("decision", what="drop_group", group=work.group.id)
                    redraws -= 1
                    (prompt,) = rt.workload.take(1)
                    launch(_Work(Group(rt.new_group_id(), rnd, prompt)), False)
                    return
                if redraws == 0:  # the limit stops a redraw: say so, once a round
                    redraws = -1
                    rt.emit("decision", what="redraw_limit", round=rnd,
                            batches=MAX_SAMPLING_BATCHES)
                if len(ready) + len(live) >= cfg.groups:  # the rest may fill the round
                    rt.emit("decision", what="drop_group", group=work.group.id)
                    return
                rt.emit("decision", what="keep_group", group=work.group.id,
                        reason="redraw_limit")
            if len(ready) < cfg.groups:
                ready.append(work.group)
                self._ready(rt, work.group)
                if len(ready) == cfg.groups:
                    finished.set()
            else:  # completed in the same instant as the R-th: keep it for later
                self.spare.append(work.group)

        carried, self.carried = self.carried, []
        for work in carried:
            work.group.round = rnd
            launch(work, True)
        for prompt in rt.workload.take(max(0, over - len(carried))):
            launch(_Work(Group(rt.new_group_id(), rnd, prompt)), False)
        await finished.wait()
        # Stop the rest: their futures resolve as aborted and the tasks end.
        await rt.engine.abort([f"{w.group.id}.{s}" for w in live.values()
                               for s in range(cfg.group_size) if s not in w.done])
        for task in list(live):
            await task
        # Every task has ended, but the done-callbacks of those that ended during the
        # abort may still wait in the loop's queue: let them run, so that `stopped`
        # holds every group the abort stopped (and in the order they stopped).
        while live:
            await asyncio.sleep(0)
        if cfg.partial_rollout:
            self.carried = stopped
        elif stopped:
            rt.emit("decision", what="discard_groups", groups=[w.group.id for w in stopped])
        return ready
