"""`rolloutbench import tinker`: tinker-cookbook's `trace_events.jsonl` (its RL loop run
with `enable_trace`), the synchronous loop's rounds, groups and trainer, timed.

Followed at thinking-machines-lab/tinker-cookbook@9dfcc3a2cf44432d621a01005073dc6d76a1e87a:
- where: `{log_path}/trace_events.jsonl` (tinker_cookbook/rl/train.py:1919-1924),
  appended to by a background thread (tinker_cookbook/utils/trace.py:328, :371-410);
- what a line is: a Chrome/Perfetto trace event `{"name", "ph", "pid", "tid", "ts",
  "args", "cat"}` (trace.py:37-64): `ph` "B" or "E" opens or closes a span named after
  the function (`@trace.scope`: its `__name__`, trace.py:723-766) or the block
  (`trace.scope_span`), "M" names a track; `ts` is `time.perf_counter()` in microseconds
  (trace.py:349-355); `pid` is the thread, renumbered from 0, and `tid` the asyncio task
  (trace.py:547-571, :371-385); an "E" carries the span's context attributes in `args`
  (trace.py:605-625);
- which spans (the synchronous loop, `do_sync_training`, train.py:1687-1856): each
  iteration's `sampling` block (:1757) runs `do_group_rollout_and_filter_constant_reward`
  once per group (rollouts.py:444), each as its own task, whose `compute_group_rewards`
  block (rollouts.py:303) grades the group; then `do_train_step_and_get_sampling_client`,
  whose "E" says its `step` (train.py:1615-1650), runs `train_step` (:283) and
  `save_checkpoint_and_get_sampling_client` (:1303), which returns the sampler on the
  new weights.

The trace names no group, no trajectory within a group and no tokens: a group is one
sample (its rollout's span, to the start of its grading), and every token count is 0
(`lacks` says so). The asynchronous and streaming loops are refused in one line.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from harness.imports.fields import check, files, jsonl, need
from harness.imports.sample import Sample, Source, SourceError

ROUND, GROUP, GRADE = "sampling", "do_group_rollout_and_filter_constant_reward", \
    "compute_group_rewards"
STEP, TRAIN, SYNC = "do_train_step_and_get_sampling_client", "train_step", \
    "save_checkpoint_and_get_sampling_client"


class _Span:
    """A B/E pair on one track, in seconds."""

    def __init__(self, where: str, name: str, track: tuple[int, int], start: float) -> None:
        self.where, self.name, self.track, self.start = where, name, track, start
        self.end = start
        self.args: dict[str, Any] = {}

    def within(self, other: _Span) -> bool:
        return other.start <= self.start <= other.end


def _spans(path: Path) -> list[_Span]:
    """The file's spans, each "B" closed by the "E" of the same name on its track."""
    open_: dict[tuple[int, int], list[_Span]] = defaultdict(list)
    last: dict[tuple[int, int], float] = {}
    out: list[_Span] = []
    for where, event in jsonl(path):
        ph = need(event, "ph", "a string", where)
        if ph == "M":
            continue
        if ph not in ("B", "E"):
            raise SourceError(f"{where}: field 'ph' must be B, E or M, got {ph!r}")
        name = need(event, "name", "a string", where)
        track = (need(event, "pid", "an integer", where), need(event, "tid", "an integer",
                                                                where))
        ts = need(event, "ts", "a number", where) / 1e6
        if ts < last.get(track, ts):
            raise SourceError(f"{where}: 'ts' goes back on its track (a resumed run?)")
        last[track] = ts
        stack = open_[track]
        if ph == "B":
            stack.append(_Span(where, name, track, ts))
            continue
        if not stack or stack[-1].name != name:
            shown = repr(stack[-1].name) if stack else "none"
            raise SourceError(f"{where}: an 'E' of {name!r}, but the span open on its track "
                              f"is {shown}")
        span = stack.pop()
        span.end = ts
        span.args = check(event.get("args", {}), "args", "an object", where)
        out.append(span)
    return out


def _rounds(spans: list[_Span]) -> list[tuple[int, _Span, _Span]]:
    """(step, its sampling span, its train-step span): each train step after the last
    `sampling` block that ended before it, on the same track."""
    out = []
    for step in sorted((s for s in spans if s.name == STEP), key=lambda s: s.start):
        if "step" not in step.args:
            raise SourceError(f"{step.where}: {STEP!r} lacks its 'step' (args.step)")
        number = check(step.args["step"], "step", "an integer", step.where)
        before = [s for s in spans if s.name == ROUND and s.track == step.track
                  and s.end <= step.start]
        if not before:
            raise SourceError(f"{step.where}: {STEP!r} step {number} follows no {ROUND!r} "
                              f"block on its track")
        out.append((number, max(before, key=lambda s: s.end), step))
    return out


def _inner(index: dict[tuple[str, tuple[int, int]], list[_Span]], name: str, outer: _Span
           ) -> _Span | None:
    """The first span named `name` on `outer`'s track within it (`index`: spans by name
    and track, each list in order of start)."""
    return next((s for s in index.get((name, outer.track), []) if s.within(outer)), None)


def read(sources: list[Path]) -> Source:
    """The groups and rounds of one run's `trace_events.jsonl`."""
    paths = files(sources, "trace_events.jsonl", "tinker-cookbook trace")
    if len(paths) != 1:
        raise SourceError(f"{paths[0]} and {len(paths) - 1} more: give one run's "
                          f"trace_events.jsonl")
    spans = _spans(paths[0])
    rounds = _rounds(spans)
    if not rounds:  # the async and streaming loops write no STEP span (docs/import.md)
        raise SourceError(f"{paths[0]}: not a do_sync_training trace (no train steps)")
    index: dict[tuple[str, tuple[int, int]], list[_Span]] = defaultdict(list)
    for span in sorted(spans, key=lambda s: s.start):
        index[(span.name, span.track)].append(span)
    rollouts = sorted((s for s in spans if s.name == GROUP), key=lambda s: (s.start, s.where))
    samples: list[Sample] = []
    phases: dict[int, dict[str, float]] = {}
    for number, sampling, step in rounds:
        for group in (s for s in rollouts if s.within(sampling)):
            grade = _inner(index, GRADE, group)
            samples.append(Sample(
                where=group.where, round=number, group=(number, group.where), index=0,
                prompt_tokens=0, response_tokens=0, versions=[number],
                submit_s=group.start, finish_s=grade.start if grade else group.end,
                verify_s=grade.end - grade.start if grade else 0.0))
        train, sync = _inner(index, TRAIN, step), _inner(index, SYNC, step)
        if train is None or sync is None:
            missing = TRAIN if train is None else SYNC
            raise SourceError(f"{step.where}: {STEP!r} step {number} holds no {missing!r}")
        phases[number] = {"start": sampling.start, "gen_end": sampling.end,
                          "dispatch": sampling.end, "train_start": train.start,
                          "train_end": train.end, "published": sync.end}
    if not samples:
        raise SourceError(f"{paths[0]}: no {GROUP!r} span within a {ROUND!r} block")
    lacks = ["token counts (the trace carries none: every response counts 0 tokens)",
             "rewards", "trajectories within a group (a group is one sample)", "truncation",
             "engine admissions"]
    notes = ["a group is one sample, timed from its rollout's start to its grading's start "
             "(K = 1)"]
    # not `tinker`, rolloutbench's model of the cookbook's asynchronous loop
    return Source(format="tinker", system="tinker-sync", files=[str(paths[0])], samples=samples,
                  lacks=lacks, notes=notes, phases=phases)
