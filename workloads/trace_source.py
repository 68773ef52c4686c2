"""Trace-driven workloads: `--workload trace:PATH` replays the work of a run.

Any trace that follows the schema (simulated, live, or converted from another
system's logs) becomes a prompt stream: its prompts, in the order the run drew
them (`request_submit.prompt` where a trace writes it, else the group id), each
with the prompt length of its `request_submit`, the final response length of each
sample (the last `request_finish` with status `finished`; a resumed response counts
its carried prefix), and the rewards and check latencies (`verify_s`) of its
`group_materialized`. A prompt the run stopped and ran again under a new group
(RollPacker's long queue) is one prompt: each sample's figures come from whichever
attempt recorded them, so a replay runs both attempts on the same work.

A prompt some of whose samples never finished (cut by the run's end, or aborted
and never resumed) replays each of those one token past where it was last cut: it
had not ended there, so that is the least length it can have, and a replay under
the same system cuts it at the same point again (at the length it reached, it
would end there instead). Said once. Why not skip such groups: they are the run's
longest, the ones an over-sampling run cut at its last round, and a replay without
them is biased short (the twin of a simulated APRIL run, fitted to its own engine,
finished its rollouts 9.4% early with them skipped and 0.6% early with them
replayed this way: tests/test_twin.py). A sample that never generated a token
(aborted before its first, or never submitted) still leaves its group out.

What a trace may lack, and the documented default used instead (said once):
- rewards (`group_materialized.rewards`, written since schema 2): sample i of a
  group scores 1 when i < ceil(K/2), else 0, so every group has reward variance;
- verifier latency (`group_materialized.verify_s`: every runtime writes it, and an
  import where its source timed the checks; for a group an abort stopped, its checked
  samples' in `decision` `group_stopped`; an older trace, an untimed import, or
  a group the run dropped before materialising it has none): 0 s.

A run that asks for more samples per group than the trace holds is refused. A
system that asks for samples beyond K (RollPacker's speculation) gets the samples
the run drew beyond K and did not keep (their lengths; rewards and latencies where
recorded, else those of sample i mod K), then the first K again, cyclically. A run
that asks for more groups than the trace holds is an error naming both numbers;
with `trace-cycle:PATH` instead the groups replay again from the first, said once
(`counterfactual` replays a run's work this way: a system that over-samples, as
APRIL and RollPacker do, draws more prompts than the run had).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.notes import say_once
from harness.core.runtime import Prompt
from harness.core.trace import iter_trace

PREFIX = "trace:"
CYCLE_PREFIX = "trace-cycle:"
DEFAULT_VERIFY_S = 0.0


class TraceWorkloadError(ValueError):
    """A trace that cannot drive the run; the message names the file and numbers."""


@dataclass(frozen=True)
class TraceGroup:
    """One replayable prompt of the source trace: the K samples its group kept (the
    last materialised first, in their order), then the others the run drew."""

    prompt_tokens: int
    lengths: tuple[int, ...]
    rewards: tuple[float, ...] | None  # None: the trace recorded none
    verify_s: tuple[float, ...] | None = None  # None: no check latency recorded
    cut: bool = False  # some lengths are where the run cut the sample (lower bounds)
    # samples beyond K the run drew and did not keep (RollPacker's speculative ones):
    # (length, reward, check latency), None where the trace recorded none
    spare: tuple[tuple[int, float | None, float | None], ...] = ()


@dataclass(frozen=True)
class TraceHidden:
    """Ground truth of a replayed prompt (the simulator's `Hidden` protocol): samples
    0..n-1, then `more` (n, n+1, ...: length, reward, check latency), then the first
    n again."""

    lengths: tuple[int, ...]
    rewards: tuple[float, ...]
    kind: str = "local"
    verify_s: tuple[float, ...] | None = None
    more: tuple[tuple[int, float, float], ...] = ()

    def sample(self, i: int) -> tuple[int, float, float]:
        n = len(self.lengths)
        if n <= i < n + len(self.more):
            return self.more[i - n]
        j = i % n
        latency = DEFAULT_VERIFY_S if self.verify_s is None else self.verify_s[j]
        return self.lengths[j], self.rewards[j], latency


def is_trace(name: str) -> bool:
    return name.startswith((PREFIX, CYCLE_PREFIX))


def trace_path(name: str) -> Path:
    return Path(name.split(":", 1)[1])


def read_groups(path: Path) -> tuple[list[TraceGroup], dict[str, Any]]:
    """The replayable groups of a trace, in prompt order, and its run_start header
    (read once per file version: a config check and the run share the reading)."""
    groups, header, _ = _read(path)
    return groups, header


def _read(path: Path) -> tuple[list[TraceGroup], dict[str, Any], bool]:
    """`read_groups`, and whether the trace ends in `run_end` (a run killed leaves it
    out: its work replays as far as it goes, said once)."""
    try:
        stat = path.stat()
    except OSError as err:
        raise TraceWorkloadError(f"{path}: cannot read the trace ({err.strerror})") from None
    return _read_groups(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _read_groups(name: str, mtime_ns: int, size: int
                 ) -> tuple[list[TraceGroup], dict[str, Any], bool]:
    path = Path(name)
    header: dict[str, Any] = {}
    kind = ""
    # Keyed by prompt (`request_submit.prompt`, else the group id): a prompt a run
    # stopped and ran again under a new group (RollPacker's long queue) is one prompt,
    # each sample's figures from whichever attempt recorded them (the last one wins).
    prompt_of: dict[int, int] = {}  # group -> prompt
    prompts: dict[int, int] = {}  # prompt -> its tokens
    lengths: dict[int, dict[int, int]] = {}  # prompt -> sample -> finished length
    reached: dict[int, dict[int, int]] = {}  # prompt -> sample -> least length, when cut
    scored: dict[int, dict[int, float]] = {}  # prompt -> sample -> reward
    checked: dict[int, dict[int, float]] = {}  # prompt -> sample -> check latency (s)
    kept: dict[int, list[int]] = {}  # prompt -> its last group's samples, in order
    for ev in iter_trace(path, allow_cut=True):  # a run killed mid-line: as far as it goes
        kind = ev["ev"]
        if kind == "run_start":
            header = ev
        elif kind == "request_submit":
            p = prompt_of[ev["group"]] = ev.get("prompt", ev["group"])
            prompts.setdefault(p, ev["prompt_tokens"])
        elif kind == "request_finish" and ev["status"] == "finished":
            p = prompt_of.get(ev["group"], ev["group"])
            lengths.setdefault(p, {})[ev["sample"]] = ev["response_tokens"]
        elif kind == "request_finish" and ev["response_tokens"] > 0:
            # cut at n tokens, unfinished: it runs at least n + 1 (a replay cut at the
            # same point cuts it again, where n would end it there instead)
            p = prompt_of.get(ev["group"], ev["group"])
            reached.setdefault(p, {})[ev["sample"]] = ev["response_tokens"] + 1
        elif kind == "group_materialized" and "rewards" in ev:
            # rewards follow the group's responses; `samples` names them (a system
            # may keep the first K to finish of more than K)
            p = prompt_of.get(ev["group"], ev["group"])
            samples = kept[p] = list(ev.get("samples") or range(len(ev["rewards"])))
            scored.setdefault(p, {}).update(zip(samples, map(float, ev["rewards"]),
                                                strict=False))
            if "verify_s" in ev:
                checked.setdefault(p, {}).update(zip(samples, map(float, ev["verify_s"]),
                                                     strict=False))
        elif kind == "decision" and ev.get("what") == "group_stopped":
            # a partial group an abort stopped (`serve(resume=...)`): the check times of
            # its finished samples, which no group_materialized may ever carry
            p = prompt_of.get(ev["group"], ev["group"])
            checked.setdefault(p, {}).update(zip(ev["samples"], map(float, ev["verify_s"]),
                                                 strict=False))
    k = _group_size(header, lengths)
    groups = []
    for p in sorted(prompts):
        done, cuts = lengths.get(p, {}), reached.get(p, {})
        # a prompt it never finished: the samples it cut, at the least lengths they have
        got = done if len(done) >= k else {**cuts, **done}
        rw, ck = scored.get(p, {}), checked.get(p, {})
        first = [s for s in kept.get(p, []) if s in got]
        order = first + [s for s in (*rw, *sorted(got)) if s in got and s not in first]
        order = list(dict.fromkeys(order))
        if len(order) < k:
            continue
        # beyond K: the samples it finished and did not keep, then those it cut
        order, spare = order[:k], order[k:] + sorted(s for s in cuts if s not in got)
        groups.append(TraceGroup(
            prompts[p], tuple(got[s] for s in order),
            tuple(rw[s] for s in order) if all(s in rw for s in order) else None,
            # a cut sample was never checked (its replay is cut again): the default
            tuple(ck.get(s, DEFAULT_VERIFY_S) for s in order)
            if ck and all(s in ck for s in order if s in done) else None,
            any(s not in done for s in order),
            tuple((got.get(s, cuts.get(s, 0)), rw.get(s), ck.get(s)) for s in spare)))
    if not groups:
        raise TraceWorkloadError(f"{path}: no group with all {k} samples finished to replay")
    if not any(any(g.lengths) for g in groups):  # an import of times alone (roll, tinker)
        raise TraceWorkloadError(f"{path}: records no response lengths (every response 0 "
                                 "tokens): nothing to replay")
    return groups, header, kind == "run_end"


def _group_size(header: dict[str, Any], lengths: dict[int, dict[int, int]]) -> int:
    """K of the source run: its config's group_size, else the most common count."""
    config = header.get("config")
    if isinstance(config, dict) and isinstance(config.get("group_size"), int):
        return config["group_size"]
    counts = [len(v) for v in lengths.values()]
    return max(set(counts), key=counts.count) if counts else 1


class TraceWorkload:
    """The prompt stream of a trace (implements `harness.core.runtime.Workload`)."""

    def __init__(self, name: str, group_size: int) -> None:
        self.name = name
        self.path = trace_path(name)
        self.groups, header, ended = _read(self.path)
        if not ended:
            say_once(f"{self.path}: no run_end (a run cut short?): its work replays as far "
                     f"as it goes")
        self.source_k = len(self.groups[0].lengths)
        if group_size > self.source_k:
            raise TraceWorkloadError(
                f"{self.path}: the trace has {self.source_k} samples per group; the run "
                f"asks for {group_size} (--group-size)")
        self._k = group_size
        self.cycle = name.startswith(CYCLE_PREFIX)
        config = header.get("config") if isinstance(header.get("config"), dict) else {}
        # Without a recorded cap (an imported run's logs may not say), one token above the
        # longest response: a response at the cap would replay as truncated (reward 0).
        self.max_tokens = int(config.get("max_response_tokens") or 0) or 1 + max(
            max(g.lengths) for g in self.groups)
        self.prompt_max = max(g.prompt_tokens for g in self.groups)
        # The source's engines were sized for its workload's longest prompt, which may be
        # longer than any it drew (EngineLoad.max_len, which prime-rl's start reads): a
        # replay on the simulator sizes them the same, from run_start's max_len.
        context, cap = header.get("max_len"), config.get("max_response_tokens")
        self.engine_prompt_max = (context - cap if isinstance(context, int) and
                                  isinstance(cap, int) and context > cap else self.prompt_max)
        self._next = 0
        if any(g.rewards is None for g in self.groups):
            say_once(f"{self.path} records no rewards for some groups: those replay with "
                      f"sample i scoring 1 when i < ceil(K/2), else 0")
        cut = sum(g.cut for g in self.groups)
        if cut:
            say_once(f"{self.path}: {cut} of its {len(self.groups)} groups were cut before "
                      f"every sample finished (the run's end, or aborted and never resumed): "
                      f"those samples replay one token past where they were cut, lower "
                      f"bounds")
        lacking = sum(g.verify_s is None for g in self.groups)
        if lacking:
            which = ("" if lacking == len(self.groups)
                     else f" for {lacking} of its {len(self.groups)} groups")
            say_once(f"{self.path} records no verifier latency{which}: replayed checks "
                      f"take {DEFAULT_VERIFY_S:g} s")

    def take(self, n: int) -> list[Prompt]:
        if self.cycle and self._next + n > len(self.groups):
            say_once(f"{self.path}: a run drew more than its {len(self.groups)} complete "
                      f"groups: they replay again from the first")
        elif self._next + n > len(self.groups):
            raise TraceWorkloadError(
                f"{self.path}: the trace has {len(self.groups)} complete groups; the run "
                f"asked for group {self._next + n} (a system that over-samples or drops groups "
                f"draws more than R x rounds: replay them again with "
                f"{CYCLE_PREFIX}{self.path})")
        out = [self.prompt(self._next + i) for i in range(n)]
        self._next += n
        return out

    def prompt(self, index: int) -> Prompt:
        g = self.groups[index % len(self.groups)]
        k = self._k
        rewards = g.rewards[:k] if g.rewards is not None else tuple(
            1.0 if i < math.ceil(k / 2) else 0.0 for i in range(k))
        verify = g.verify_s[:k] if g.verify_s is not None else None
        # samples from K on: the kept ones this run's K leaves over, then the spares,
        # each with its own reward and latency where recorded, else sample i % K's
        rest = [(n, None if g.rewards is None else g.rewards[i],
                 None if g.verify_s is None else g.verify_s[i])
                for i, n in enumerate(g.lengths) if i >= k] + list(g.spare)
        more = tuple((n, rewards[i % k] if r is None else r,
                      (DEFAULT_VERIFY_S if verify is None else verify[i % k]) if v is None
                      else v) for i, (n, r, v) in enumerate(rest, start=k))
        return Prompt(index=index, tokens=g.prompt_tokens,
                      hidden=TraceHidden(g.lengths[:k], rewards, verify_s=verify, more=more))
