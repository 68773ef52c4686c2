"""APRIL: active partial rollouts (slime's `--partial-rollout` with over-sampling).

Each round submits over-sampling batches of `over_sampling_groups` groups and stops
as soon as `groups` (slime's rollout batch size) of them are complete: the rest are
aborted. With `partial_rollout` their partial responses (tokens and policy versions)
and any finished samples are kept and resumed first in the next round, ahead of new
prompts; without it they are discarded. The complete groups make one optimizer step
per round (global batch = R x K samples).

This follows the authors' code, RLsys-Foundation/APRIL@a72b5853 (cited below as
APRIL@a72b585), the slime fork the paper ran:

- a round's loop: `while len(data) < target: while remaining < target: submit
  get_samples(over_sampling_batch_size)` (slime/rollout/sglang_example.py:241-245),
  where the target is `rollout_batch_size` (:235) and `remaining` counts the groups
  submitted this round less those the filter dropped (:68, :261). A batch takes the
  buffered (aborted) groups first, `pop_first` at most a batch's worth, and new
  prompts for the rest (slime/ray/buffer.py:20-24, :116-157);
- the abort: every group still pending is stopped; with `--partial-rollout` it goes
  back to the buffer, whole (its finished samples too), else it is dropped
  (sglang_example.py:174-205);
- `over_sampling_batch_size` defaults to `rollout_batch_size` (slime/utils/arguments.py:
  929-930): a run without `--over-sampling-batch-size` over-samples nothing.

`dynamic_sampling` is DAPO's filter as the DAPO scripts set it
(`check_reward_nonzero_std`, slime/rollout/filter_hub/dynamic_sampling_filters.py:8-10:
a group whose K rewards have zero standard deviation is dropped). slime does not
replace a dropped group one for one: the dropped group leaves `remaining`, and once
fewer than R groups are complete or in flight a whole new over-sampling batch of
`over_sampling_groups` groups is submitted (sglang_example.py:241-245, 260-262; the
same in THUDM/slime@624b824:slime/rollout/sglang_rollout.py:407-436). So the DAPO
baseline (`over_sampling_groups` = R, the default, since its scripts leave
`--over-sampling-batch-size 64` commented out: scripts/partial_rollout/qwen/dapo/
run-qwen3-4B-dapo.sh:90-92) submits R more groups at its first dropped group.

With `over_sampling_groups` = R (or 0) and no partial rollout, this is the standard
synchronous baseline. Unset, `over_sampling_groups` is the paper's 2R (its runs:
`over_sampling_batch_size=64` for `rollout_batch_size=32`), with partial rollout on,
so `--system april` alone runs APRIL as published.

Each sample is scored as it finishes (sglang_example.py:150, 161-163). A group whose K
responses are in when the round has its R (a check still running) completes after the
abort, a `spare` for the next round (at most R - 1 a round, so that it generates):
slime's abort() waits for it too and, with `--partial-rollout`, buffers it whole, done
at once when taken next round; without, slime drops it (:264-268), and so do we past
R - 1 spares (`discard_groups`), training the others next round: a difference kept.
"""

from __future__ import annotations

from typing import Any

from harness.core.runtime import Group, Handle, Runtime
from systems.common import BatchCounter, PartialGroup

RESUME_FIRST = -1  # priority of resumed samples: ahead of new prompts
PAPER_OVER_SAMPLING = 2  # N' = 2R: the paper's over_sampling_batch_size (64 for R = 32)
ZERO_STD = "zero reward variance"  # the `reason` of a group dynamic sampling drops
SPARES = "complete after the round's R, with R - 1 spares kept"


def over_sampling_groups(cfg: Any) -> int:
    """N', the groups in flight per round: the config's (0 means R: none), or the
    paper's 2R when unset."""
    if cfg.over_sampling_groups is None:
        return PAPER_OVER_SAMPLING * cfg.groups
    return max(cfg.over_sampling_groups, cfg.groups)

MAX_SAMPLING_BATCHES = 10
"""Dynamic sampling's limit, the simulator's own: a round submits at most this many
over-sampling batches (`max(over_sampling_groups, groups)` groups each; the first,
buffered groups included, counts as one). APRIL's code has no limit (its loop runs
until R groups pass the filter, sglang_example.py:241), so a round whose groups all
score alike (every response cut off by a short `max_response_tokens` scores 0) would
never end. No run of the reproduction comes near it. Past the limit the round goes on
with what it has, as upstream slime's `check_reward_nonzero_std_with_fallback` does
(THUDM/slime@624b824:slime/rollout/filter_hub/base_types.py:14-24): a zero-variance
group is still dropped while the groups complete or in flight could fill the round
without it, and otherwise trained, so each round still trains R groups. It is recorded
as a `redraw_limit` decision (once a round) and a `keep_group` decision per
zero-variance group kept. Not a RunConfig field: harness/core/config.py is shared by
every system."""


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
        self.carried: list[PartialGroup] = []
        self.spare: list[Group] = []  # complete groups beyond R: trained next round

    def staleness_bound(self, cfg: Any) -> int | None:
        """With partial rollout none: an aborted group is resumed first next round but
        may be aborted again, round after round. Without it 1 step: a round trains on
        its own weights in one step, but a spare (complete as the round stops, the
        module's docstring) is trained one round later."""
        return None if cfg.partial_rollout else 1

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
        ready = self.spare[: cfg.groups - 1]  # at most R - 1: the round generates
        self.spare = self.spare[cfg.groups - 1 :]
        for group in ready:
            self._ready(rt, group)
        finished = rt.event()
        stopped: list[PartialGroup] = []
        live: dict[Handle[Group], PartialGroup] = {}
        buffer, self.carried = self.carried, []  # slime's data buffer: aborted groups
        batches = 0  # over-sampling batches submitted this round
        limit_said = False

        def launch(work: PartialGroup, resumed: bool) -> None:
            """Serve the group's unfinished samples, each scored as it ends (APRIL's code:
            sglang_example.py:150, 161-163); done when all K are, or the abort stops it."""
            task = rt.spawn(rt.serve(work.group, priority=RESUME_FIRST if resumed else 0,
                                     resume=work))
            live[task] = work
            task.add_done_callback(on_done)

        def submit_batch() -> None:
            """One over-sampling batch (`get_samples(over_sampling_batch_size)`): at most
            `over` buffered groups first, new prompts for the rest."""
            nonlocal buffer, batches
            batches += 1
            resumed, buffer = buffer[:over], buffer[over:]
            for work in resumed:
                work.group.round = rnd
                launch(work, True)
            for prompt in rt.workload.take(over - len(resumed)):
                launch(PartialGroup(Group(rt.new_group_id(), rnd, prompt)), False)

        def on_done(task: Handle[Group]) -> None:
            nonlocal limit_said
            work = live.pop(task)
            if task.cancelled() or task.exception() is not None:
                return
            if len(work.done) < cfg.group_size:  # stopped by the abort: resume it next round
                stopped.append(work)
                return
            if cfg.dynamic_sampling and len(set(work.group.rewards)) == 1:
                # slime's `remaining` (submitted less dropped) is what is complete or in
                # flight: while it stays at R or more, the group is simply dropped
                if len(ready) + len(live) >= cfg.groups:
                    rt.emit("decision", what="drop_group", group=work.group.id,
                            reason=ZERO_STD)
                    return
                if batches < MAX_SAMPLING_BATCHES:  # fewer than R left: a new batch
                    rt.emit("decision", what="drop_group", group=work.group.id,
                            reason=ZERO_STD)
                    rt.emit("decision", what="over_sample", round=rnd, batch=batches + 1,
                            groups=over)
                    submit_batch()
                    return
                if not limit_said:  # the limit stops a new batch: say so, once a round
                    limit_said = True
                    rt.emit("decision", what="redraw_limit", round=rnd,
                            batches=MAX_SAMPLING_BATCHES)
                rt.emit("decision", what="keep_group", group=work.group.id,
                        reason="redraw_limit")
            if len(ready) < cfg.groups:
                ready.append(work.group)
                self._ready(rt, work.group)
                if len(ready) == cfg.groups:
                    finished.set()
            elif cfg.partial_rollout or len(self.spare) < cfg.groups - 1:
                self.spare.append(work.group)  # complete as the round stopped
            else:
                rt.emit("decision", what="discard_groups", groups=[work.group.id],
                        reason=SPARES)

        submit_batch()
        await finished.wait()
        # Stop the rest: their futures resolve as aborted and the tasks end.
        await rt.engine.abort([f"{w.group.id}.{s}" for w in live.values()
                               for s in range(cfg.group_size) if s not in w.done])
        await rt.gather(*live)
        # Every task has ended, but the done-callbacks of those that ended during the
        # abort may still wait in the loop's queue: let them run, so that `stopped`
        # holds every group the abort stopped (and in the order they stopped).
        while live:
            await rt.sleep(0)
        if cfg.partial_rollout:  # the buffer: groups not resubmitted, then those stopped
            self.carried = buffer + stopped
        elif stopped:
            rt.emit("decision", what="discard_groups", groups=[w.group.id for w in stopped],
                    reason="aborted, no partial rollout")
        return ready
