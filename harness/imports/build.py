"""A trace from another system's samples: the events rolloutbench's own runs write.

The rules a trace keeps and a source does not: integer group ids unique in the
run (given out in the order the groups first appear, round by round, so that a
replay draws them in the source's order), rounds numbered from 0, times in
seconds since the first submission and never going backwards, and a resumed
response that names its carried prefix (`resumed_tokens`) and its versions.

A source with a wall-clock time for every response is *timed*: each attempt is
submitted, admitted (when the source says) and finished at its own times, its
group is complete when its last response is and materialised when its last
check is, and a round starts at its first submission and completes at its last
materialisation. A source without them is *untimed*: every event is at t = 0,
in the source's order, and `run_start` says so (`import.timed` false), so that
`metrics` reports no timings instead of zeros. Nothing about the trainer is
invented: an imported trace has no batches or optimizer steps unless its source
recorded them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from harness import __version__
from harness.core.trace import SCHEMA
from harness.imports.sample import Sample, Source, SourceError

# Ties at one instant keep the order a run writes them in.
_RANK = {"rollout_start": 0, "request_submit": 1, "request_admit": 2, "request_finish": 3,
         "group_complete": 4, "group_materialized": 5, "decision": 6, "rollout_complete": 7,
         "batch_dispatch": 8, "train_start": 9, "train_end": 10, "optimizer_step": 11,
         "weights_published": 12}


def _spans(s: Sample, round_version: int) -> list[list[int]]:
    """[version, tokens] of the whole response: the source's, else the carried
    prefix with the first version and the rest with the last (merged when equal)."""
    if s.spans is not None:
        return [list(p) for p in s.spans]
    first = s.versions[0] if s.versions else round_version
    last = s.versions[-1] if s.versions else round_version
    parts = [[first, s.carried_tokens], [last, s.response_tokens - s.carried_tokens]]
    out: list[list[int]] = []
    for v, n in parts:
        if n <= 0:
            continue
        if out and out[-1][0] == v:
            out[-1][1] += n
        else:
            out.append([v, n])
    return out


def _check(s: Sample) -> None:
    for name in ("prompt_tokens", "response_tokens", "carried_tokens"):
        value = getattr(s, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise SourceError(f"{s.where}: {name} must be a whole number >= 0, got {value!r}")
    if s.carried_tokens > s.response_tokens:
        raise SourceError(f"{s.where}: the carried prefix ({s.carried_tokens} tokens) is longer "
                          f"than the response ({s.response_tokens})")
    if s.status not in ("finished", "aborted"):
        raise SourceError(f"{s.where}: status must be finished or aborted, got {s.status!r}")
    if s.timed and s.finish_s < s.submit_s:  # type: ignore[operator]
        raise SourceError(f"{s.where}: finished ({s.finish_s}) before it was submitted "
                          f"({s.submit_s})")


def _by_group(samples: list[Sample]) -> dict[object, list[Sample]]:
    out: dict[object, list[Sample]] = defaultdict(list)
    for s in samples:
        out[s.group].append(s)
    return out


def _trainer(add: Any, at: Any, phase: dict[str, float], rnd: int, version: int,
             items: list[Sample], group_id: dict[object, int]) -> None:
    """The round's trainer as the source timed it: the batch leaves when its rewards
    are done (or at `dispatch`, where the source says), is trained (veRL: old_log_prob
    to update_actor) and published."""
    groups = list(dict.fromkeys(group_id[s.group] for s in items))
    leaves = phase.get("dispatch", phase.get("reward_end"))
    add(at(leaves), "batch_dispatch", batch=rnd, groups=groups, round=rnd)
    add(at(phase["train_start"]), "train_start", batch=rnd,
        samples=sum(1 for s in items if s.status == "finished"))
    add(at(phase["train_end"]), "train_end", batch=rnd)
    # the step's trained tokens, as the simulator's step counts them (its finished
    # responses'): the yardstick's trained tokens a second read them
    add(at(phase["train_end"]), "optimizer_step", step=rnd + 1, version=version + 1,
        tokens=sum(s.response_tokens for s in items if s.status == "finished"))
    add(at(phase["published"]), "weights_published", version=version + 1)


def build(source: Source) -> list[dict[str, Any]]:
    """The trace's events, `run_start` first; SourceError for what cannot be one."""
    samples = source.samples
    if not samples:
        raise SourceError(f"{', '.join(source.files)}: no samples found")
    for s in samples:
        _check(s)
    timed = all(s.timed for s in samples)
    rounds = sorted({s.round for s in samples})
    number = {r: i for i, r in enumerate(rounds)}
    order = sorted(range(len(samples)), key=lambda i: (number[samples[i].round], i))
    group_id: dict[object, int] = {}
    for i in order:
        group_id.setdefault(samples[i].group, len(group_id))
    t0 = min(s.submit_s for s in samples) if timed else 0.0  # type: ignore[type-var]

    def at(wall: float | None) -> float:
        return round(wall - t0, 6) if timed and wall is not None else 0.0

    events: list[tuple[float, int, int, dict[str, Any]]] = []

    phased = bool(source.phases) and timed  # a source that timed its rounds' phases
    current = [0]  # the round being built: with phases, ties go round by round

    def add(t: float, ev: str, **fields: Any) -> None:
        rank = (current[0], _RANK[ev]) if phased else _RANK[ev]
        events.append((t, rank, len(events), {"t": t, "ev": ev, **fields}))  # type: ignore[arg-type]

    by_round: dict[int, list[Sample]] = defaultdict(list)
    for i in order:
        by_round[number[samples[i].round]].append(samples[i])
    groups = _by_group(samples)
    last_round_of = {}  # group -> the round of its last attempt (where its events go)
    for rnd, items in by_round.items():
        for s in items:
            last_round_of[s.group] = rnd
    for rnd, items in sorted(by_round.items()):
        current[0] = rnd
        phase = source.phases.get(rounds[rnd]) if phased else None
        lasts = [s.versions[-1] for s in items if s.versions]
        version = min(lasts) if lasts else rnd
        add(at(min(s.submit_s for s in items)) if timed else 0.0,  # type: ignore[type-var]
            "rollout_start", round=rnd, version=version)
        for s in items:
            g = group_id[s.group]
            add(at(s.submit_s), "request_submit", round=rnd, group=g, sample=s.index,
                prompt_tokens=s.prompt_tokens, resumed_tokens=s.carried_tokens)
            if s.admit_s is not None and timed:
                add(at(s.admit_s), "request_admit", group=g, sample=s.index)
            spans = _spans(s, version)
            extra = ({"first_token_t": at(s.first_token_s)}
                     if s.first_token_s is not None and timed else {})
            add(at(s.finish_s), "request_finish", group=g, sample=s.index,
                response_tokens=s.response_tokens, status=s.status,
                versions=sorted({v for v, _ in spans}), version_spans=spans,
                truncated=s.truncated, **extra)
        ends = []
        for key in dict.fromkeys(s.group for s in items if last_round_of[s.group] == rnd):
            members = groups[key]  # every round's: a member may have finished earlier
            done = [s for s in members if s.status == "finished"]
            if not done:
                continue
            g = group_id[key]
            finished = max(at(s.finish_s) for s in done)
            add(finished, "group_complete", group=g, round=rnd)
            checked = max(at(s.finish_s + (s.verify_s or 0.0)) if timed else 0.0 for s in done)
            if phase and "reward_end" in phase:  # rewards are the batch's (veRL): done
                # when the round's reward phase is (ROLL's, per request, say `dispatch`)
                checked = max(checked, at(phase["reward_end"]))
            fields: dict[str, Any] = {"samples": [s.index for s in done]}
            if all(s.reward is not None for s in done):
                fields["rewards"] = [float(s.reward) for s in done]  # type: ignore[arg-type]
            if all(s.verify_s is not None for s in done):
                fields["verify_s"] = [round(float(s.verify_s), 6) for s in done]  # type: ignore[arg-type]
            add(checked, "group_materialized", group=g, **fields)
            if any(s.dropped for s in members):
                add(checked, "decision", what="drop_group", group=g,
                    reason="rejected by the run (recorded as dropped in its log)")
            ends.append(checked)
        # the round ends after its own aborts too: slime cuts the over-sampled requests
        # once the batch is full and waits for them to return before it trains
        ends += [at(s.finish_s) for s in items if s.status == "aborted"]
        add(max(ends, default=0.0) if timed else 0.0, "rollout_complete", round=rnd)
        if phase:
            _trainer(add, at, phase, rnd, version, items, group_id)
    events.sort(key=lambda e: (e[0], e[1], e[2]) if timed else (e[2],))
    sizes = Counter(len({s.index for s in members}) for members in groups.values())
    k = max(sizes, key=lambda n: (sizes[n], n))  # K: the most common group size
    notes = list(source.notes)
    more = sum(n for size, n in sizes.items() if size > k)
    fewer = sum(n for size, n in sizes.items() if size < k)
    if more:
        notes.append(f"{more} groups hold more than K={k} responses (the same prompt twice "
                     f"in one batch, merged?): a replay takes their first {k}")
    if fewer:
        notes.append(f"{fewer} groups hold fewer than K={k} responses: a replay skips them")
    groups_per_round = Counter(len({s.group for s in items}) for items in by_round.values())
    # the most common groups per round (the fewer on a tie: a replay must not run out)
    groups = max(groups_per_round, key=lambda n: (groups_per_round[n], -n))
    cap = source.max_response_tokens
    if cap is None:  # a response stopped at the cap tells it
        cap = max((s.response_tokens for s in samples if s.truncated), default=None)
    config = {"rounds": len(rounds), "groups": groups,
              "group_size": k, "max_response_tokens": cap}
    head = {"t": 0.0, "ev": "run_start", "schema": SCHEMA,
            "system": source.system or source.format,
            "workload": f"import:{source.format}", "runtime": "import", "seed": 0,
            "config": config, "version": __version__,
            "import": {"format": source.format, "files": source.files, "timed": timed,
                       "versions": source.versions,
                       "lacks": source.lacks, "notes": notes,
                       "source_rounds": rounds}}
    end_t = max((e[0] for e in events), default=0.0)
    return [head, *(e[3] for e in events), {"t": end_t, "ev": "run_end"}]
