"""`rolloutbench import roll`: ROLL's OpenTelemetry traces (`ROLL_OTEL_ENABLED=1`).

Followed at alibaba/ROLL@8eb27cc2dc34c4d1310b169d9b86d339004d811a:
- where and how: `{otlp_output_dir}/traces/traces.jsonl` (roll/utils/telemetry.py:148-215,
  roll/configs/base_config.py:228), one ExportTraceServiceRequest per line as protobuf's
  JSON mapping writes it, ids in hex (roll/utils/otel_receiver.py:111-128, :47-79; the
  receiver starts `traces.1.jsonl` after 500 lines, :95-109);
- which spans (the RLVR pipeline): `pipeline_step` with `global_step` around each step
  (roll/pipeline/rlvr/rlvr_pipeline.py:491), within it `model_update` (:517),
  `validation` (:530), `generate` (:540), `old_log_probs_and_values` (:618) and `train`
  (:768); the scheduler's `process_new_prompt` with `prompt_id` per prompt
  (roll/distributed/scheduler/generate_scheduler.py:840-843), `generate_and_reward` per
  request (roll/distributed/scheduler/user_defined_rollout_loop.py:246), and within it
  one `rollout.generate` per engine request (`prompt_id`, `request_id`) and
  `rollout.compute_rewards` per reward call (generate_scheduler.py:952-991). An
  unfinished response is sent again with its output so far when `collect_unfinished`
  (user_defined_rollout_loop.py:258-281): a `rollout.generate` followed by another
  before any reward call was cut (an aborted attempt, carried on).

ROLL's spans hold times, not tokens or rewards: the import is a timed trace of rounds,
requests, reward checks and the trainer, with every token count 0 (`lacks` says so).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from harness.imports.fields import check, files, need
from harness.imports.otlp import attrs, spans
from harness.imports.sample import Sample, Source, SourceError

STEP, GENERATE, REWARD = "pipeline_step", "rollout.generate", "rollout.compute_rewards"
EVAL = ("validation", "val", "val_generate")  # eval spans: their requests are left out


class _Span:
    """The fields of one span the import reads, in seconds."""

    def __init__(self, where: str, raw: Any) -> None:
        self.where = where
        self.name = need(raw, "name", "a string", where)
        self.id = need(raw, "spanId", "a string", where)
        parent = raw.get("parentSpanId", "")
        self.parent = check(parent, "parentSpanId", "a string", where)
        self.start = _seconds(raw, "startTimeUnixNano", where)
        self.end = _seconds(raw, "endTimeUnixNano", where)
        self.attrs = attrs(raw.get("attributes", []), where)

    def attr(self, key: str) -> int:
        if key not in self.attrs:
            raise SourceError(f"{self.where}: span {self.name!r} lacks attribute {key!r}")
        return check(self.attrs[key], key, "an integer", self.where)  # type: ignore[no-any-return]


def _seconds(raw: Any, key: str, where: str) -> float:
    value = raw.get(key) if isinstance(raw, dict) else None
    if isinstance(value, str) and value.isdigit():
        return int(value) / 1e9
    return check(need(raw, key, "an integer", where), key, "an integer", where) / 1e9  # type: ignore[no-any-return]


def _read_spans(paths: list[Path]) -> dict[str, _Span]:
    out: dict[str, _Span] = {}
    for path in paths:
        for where, raw in spans(path):
            span = _Span(where, raw)
            out[span.id] = span
    return out


def _ancestors(span: _Span, by_id: dict[str, _Span]) -> list[_Span]:
    """The span's parents, nearest first, as far as the file holds them."""
    out, seen = [], {span.id}
    while span.parent and span.parent in by_id and span.parent not in seen:
        span = by_id[span.parent]
        seen.add(span.id)
        out.append(span)
    return out


def _samples(by_id: dict[str, _Span]) -> list[Sample]:
    """A sample per chain of engine requests ending in a reward call, in its step;
    requests under an eval span are left out."""
    children: dict[str, list[_Span]] = defaultdict(list)
    for span in by_id.values():
        if span.name in (GENERATE, REWARD):
            children[span.parent].append(span)
    out: list[Sample] = []
    per_group: dict[int, int] = defaultdict(int)
    for _, kids in sorted(children.items(), key=lambda kv: min(s.start for s in kv[1])):
        first = kids[0]
        chain = _ancestors(first, by_id)
        if any(a.name in EVAL for a in chain):
            continue
        step = next((a for a in chain if a.name == STEP), None)
        if step is None:
            raise SourceError(f"{first.where}: span {first.name!r} is under no "
                              f"{STEP!r} span in these files (a file missing, or cut?)")
        rnd = step.attr("global_step")
        attempts: list[_Span] = []
        for span in sorted(kids, key=lambda s: (s.start, s.end)):
            if span.name == GENERATE:
                attempts.append(span)
                continue
            if not attempts:
                continue  # a reward call with no request before it: nothing generated
            group = attempts[-1].attr("prompt_id")
            index = per_group[group]
            per_group[group] += 1
            for k, attempt in enumerate(attempts):
                last = k == len(attempts) - 1
                out.append(Sample(
                    where=attempt.where, round=rnd, group=group, index=index,
                    prompt_tokens=0, response_tokens=0,
                    status="finished" if last else "aborted",
                    versions=[rnd], submit_s=attempt.start, finish_s=attempt.end,
                    verify_s=span.end - span.start if last else None))
            attempts = []
    return out


def _phases(by_id: dict[str, _Span]) -> dict[int, dict[str, float]]:
    """Each step's phases from its driver spans: generation (rewards are computed per
    request within it), the trainer from `old_log_probs_and_values` to `train`'s end,
    and the new weights published at the end of the next step's `model_update`."""
    steps = {s.id: s for s in by_id.values() if s.name == STEP}
    parts: dict[str, dict[str, _Span]] = defaultdict(dict)
    for span in by_id.values():
        if span.parent in steps:
            parts[span.parent].setdefault(span.name, span)
    by_round = sorted((s.attr("global_step"), s) for s in steps.values())
    out: dict[int, dict[str, float]] = {}
    for i, (rnd, step) in enumerate(by_round):
        mine = parts[step.id]
        if "generate" not in mine or "train" not in mine:
            continue
        gen, train = mine["generate"], mine["train"]
        start = mine.get("old_log_probs_and_values", train).start
        later = parts[by_round[i + 1][1].id] if i + 1 < len(by_round) else {}
        published = later["model_update"].end if "model_update" in later else train.end
        out[rnd] = {"start": step.start, "gen_end": gen.end, "dispatch": gen.end,
                    "train_start": start, "train_end": train.end, "published": published}
    return out


def read(sources: list[Path]) -> Source:
    """The samples and step phases of ROLL's OTLP trace files."""
    paths = files(sources, "traces/traces*.jsonl", "ROLL OTLP traces",
                  inside="traces*.jsonl")
    by_id = _read_spans(paths)
    if not any(s.name == STEP for s in by_id.values()):
        raise SourceError(f"{', '.join(map(str, paths))}: no {STEP!r} spans: not a ROLL "
                          f"pipeline's trace (ROLL_OTEL_ENABLED=1)?")
    samples = _samples(by_id)
    if not samples:
        raise SourceError(f"{', '.join(map(str, paths))}: no {GENERATE!r} span ending in a "
                          f"{REWARD!r}: only ROLL's RLVR pipelines trace their requests")
    lacks = ["token counts (ROLL's spans carry none: every response counts 0 tokens)",
             "rewards", "truncation", "per-request versions (the step's is put)",
             "engine admissions"]
    notes = ["a request for several responses (is_num_return_sequences_expand false, "
             "ROLL's default) is one sample: K is the requests per prompt, not the "
             "responses"]
    return Source(format="roll", system="", files=[str(p) for p in paths], samples=samples,
                  lacks=lacks, notes=notes, phases=_phases(by_id))
