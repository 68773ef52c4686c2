"""AReaL's trajectory dump (`rollout.dump_to_file`), timed by its session tracer when
one is given.

Followed: inclusionAI/AReaL at 4aef98d8d818af55b43621aaadba047ae10f4e77,
`areal/infra/workflow_executor.py` (`_dump_trajectory`: one file per group,
`{log_path}/rollout/{tail_version}/{task_id}.jsonl`, a JSON object per
sample with `task_id`, `sample_idx`, `seqlen`, `prompt_len`, `head_version`,
`tail_version`, `reward`, `prompt`, `completion`) and `areal/utils/perf_tracer.py`
(`SessionRecord.to_dict`: `sessions-r{rank}.jsonl`, one record per sample with
`task_id`, `session_id`, `status`, `submit_ts`, `finalized_ts` and `phases`,
`time.time()` seconds).

What the dump holds: per response its group (one file, one `task_id`), its place
(`sample_idx`), prompt and response tokens (`prompt_len`, `seqlen - prompt_len`)
and reward. Versions are per group: `tail_version` (the newest weights any token
of the group came from) is kept as the round; `head_version` is -1 whenever a
prompt is present (prompt tokens carry -1), so it says nothing. The dump lacks
times, truncation (no stop reason) and which groups dynamic filtering rejected
(the dump is written before the decision).

What the session tracer adds: a sample's generation start (`submit_ts`, taken
when the sample starts, not when its task was submitted), its generation and
reward spans (`phases`), and its group's fate (`status` rejected). Sessions are
matched to samples by task id and then in order (the tracer gives no sample
index; sessions register in the order the group's samples start).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from harness.imports.fields import check, files, jsonl, need
from harness.imports.sample import Sample, Source, SourceError

PATTERN = "**/rollout/*/*.jsonl"
SESSIONS = "sessions-r*.jsonl"


def _split(sources: list[Path]) -> tuple[list[Path], list[Path]]:
    """(dump sources, session-tracer files): a folder may hold both."""
    dumps, sessions = [], []
    for src in sources:
        if src.is_dir():
            found = sorted(src.glob(f"**/{SESSIONS}"))
            sessions += found
            if any(src.glob(PATTERN)):
                dumps.append(src)
            elif not found:
                dumps.append(src)  # neither: `files` names what was looked for
        elif src.name.startswith("sessions-r"):
            sessions.append(src)
        else:
            dumps.append(src)
    return dumps, sessions


def _sessions(paths: list[Path]) -> dict[int, list[tuple[str, dict[str, Any]]]]:
    """task id -> its sessions in file order."""
    out: dict[int, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for path in paths:
        for where, rec in jsonl(path):
            task = need(rec, "task_id", "an integer", where)
            need(rec, "submit_ts", "a number", where)
            out[task].append((where, rec))
    return out


def _span(rec: dict[str, Any], phase: str, where: str) -> tuple[float, float] | None:
    """(first start, last end) of a phase's spans, or None when it has none."""
    phases = check(rec.get("phases", {}), "phases", "an object", where)
    spans = phases.get(phase)
    if not spans:
        return None
    check(spans, f"phases.{phase}", "a list", where)
    starts = [need(s, "start_ts", "a number", where) for s in spans]
    ends = [need(s, "end_ts", "a number", where) for s in spans]
    return min(starts), max(ends)


def read(sources: list[Path]) -> Source:
    dump_sources, session_paths = _split(sources)
    paths = [p for p in files(dump_sources, PATTERN, "AReaL trajectory dump", "**/*.jsonl")
             if not p.name.startswith("sessions-r")]
    sessions = _sessions(session_paths)
    samples: list[Sample] = []
    by_task: dict[int, list[Sample]] = defaultdict(list)
    for path in paths:
        if "eval-rollout" in path.parts:
            continue
        for where, rec in jsonl(path):
            task = need(rec, "task_id", "an integer", where)
            seqlen = need(rec, "seqlen", "an integer", where)
            prompt = need(rec, "prompt_len", "an integer", where)
            if prompt > seqlen:
                raise SourceError(f"{where}: prompt_len ({prompt}) exceeds seqlen ({seqlen})")
            version = need(rec, "tail_version", "an integer", where)
            need(rec, "head_version", "an integer", where)
            s = Sample(where=where, round=version, group=(str(path), task),
                       index=need(rec, "sample_idx", "an integer", where),
                       prompt_tokens=prompt, response_tokens=seqlen - prompt,
                       reward=float(need(rec, "reward", "a number", where)),
                       versions=[version])
            samples.append(s)
            by_task[task].append(s)
    if not samples:
        raise SourceError(f"{', '.join(map(str, dump_sources))}: no training rollouts "
                          f"(only eval-rollout?)")
    notes = ["versions are per group (tail_version: the newest weights of any of its "
             "tokens); head_version is -1 (prompt tokens) and is not used"]
    lacks = ["truncation (no stop reason)", "versions within a group"]
    if sessions:
        timed = _time(by_task, sessions)
        notes.append(f"{timed} of {len(by_task)} groups timed by the session tracer "
                     f"(sessions matched to samples in order)")
        if timed < len(by_task):
            notes.append(f"untimed: {len(by_task) - timed} groups have no session per "
                         f"sample (a tracer file missing, or cut short?), and a trace is "
                         f"timed only when every response is")
    else:
        lacks += ["per-request times (no session tracer file given)", "verifier latency",
                  "dynamic-filter rejections (no session tracer file given)"]
    return Source(format="areal", system="", files=[str(p) for p in paths + session_paths],
                  samples=samples, lacks=lacks, notes=notes, versions="newest")


def _time(by_task: dict[int, list[Sample]],
          sessions: dict[int, list[tuple[str, dict[str, Any]]]]) -> int:
    """Set each sample's times from its session; returns the groups timed. A group
    whose sessions do not match its samples one to one stays untimed (and so the
    whole trace, which then says so)."""
    timed = 0
    for task, members in by_task.items():
        recs = sessions.get(task, [])
        if len(recs) != len(members):
            continue
        for s, (where, rec) in zip(sorted(members, key=lambda m: m.index), recs, strict=True):
            gen = _span(rec, "generate", where)
            reward = _span(rec, "reward", where)
            s.submit_s = rec["submit_ts"]
            s.admit_s = gen[0] if gen else None
            s.finish_s = gen[1] if gen else rec.get("finalized_ts", rec["submit_ts"])
            s.verify_s = (reward[1] - reward[0]) if reward else None
            s.dropped = rec.get("status") == "rejected"
        timed += 1
    return timed
