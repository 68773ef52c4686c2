"""slime's rollout dumps: `--save-debug-rollout-data PATH_{rollout_id}.pt`, or
`--dump-details DIR` (DIR/rollout_data/{rollout_id}.pt).

Followed: THUDM/slime at 624b824a898ab0ec1fcb4d373004c7f3852bf515,
`slime/observability/rollout_data_utils.py` (`save_debug_rollout_data`:
`torch.save({"rollout_id", "samples": [Sample.to_dict(), ...]})`),
`slime/utils/types.py` (`Sample`, its `Status` values, `to_dict`),
`slime/observability/trace_utils.py` (the per-sample `trace`: `span_start` /
`span_end` records with `time.time()` stamps) and `slime/rollout/sglang_rollout.py`
(the `sglang_generate` span's end attributes, `metadata["start_rollout_id"]` on a
partial rollout carried over, one `weight_versions` entry per finished request).

What a sample holds: its group (`group_index`), place (`index`), prompt and
response tokens (`tokens` is prompt + response, `response_length` the
response), status (`completed`, `truncated`, `aborted`...), reward (a number,
or a dict whose `score` slime's dapo reward model gives), the weight versions
of its requests, and, since slime added tracing, the wall-clock span of each
engine request with its token count and queue time, and of its reward check.

A response carried over from an earlier rollout (`start_rollout_id`) is split
at its engine requests: each request that ended in `abort` is an aborted attempt
in the rollout it ran in (the first in `start_rollout_id`, the next ones in the
rollouts after), carrying its tokens on; the last request is the attempt in the
rollout that trained it. A member finished before its group was cut and carried
along whole is one finished attempt in the rollout it ran in.

Safety: a `.pt` file is a pickle. It is opened with `torch.load(weights_only=True)`,
which builds only tensors and plain containers, with numpy's scalar types as the
one allowlist (reward functions return them); a file that needs anything else
is refused, naming what it needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.imports.fields import check, files, need
from harness.imports.sample import Sample, Source, SourceError

PATTERN = "**/*.pt"
FINISHED = {"completed": "finished", "truncated": "finished", "aborted": "aborted",
            "failed": "aborted", "pending": "aborted"}


def _allowlist() -> list[Any]:
    """numpy scalars and their dtypes: what a reward function's return puts in a dump."""
    import numpy as np

    scalar = getattr(np, "_core", np.core).multiarray.scalar  # type: ignore[attr-defined]
    kinds = [np.dtypes.Float64DType, np.dtypes.Float32DType, np.dtypes.Int64DType,
             np.dtypes.Int32DType, np.dtypes.BoolDType]
    return [scalar, np.dtype, *kinds]


def load(path: Path) -> Any:
    """The object in a .pt file, built without running any code it names."""
    try:
        import torch
    except ImportError:
        raise SourceError(f"{path}: reading slime's .pt files needs torch "
                          f"(make setup-live installs it)") from None
    import pickle
    import zipfile

    if not zipfile.is_zipfile(path):  # torch.save has written zip archives since 1.6
        raise SourceError(f"{path}: not a readable torch.save file (not a zip archive)")
    try:
        with torch.serialization.safe_globals(_allowlist()):
            return torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError:
        try:
            needs = torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
        except Exception:  # noqa: BLE001 - only to name them; the refusal stands
            needs = []
        # a weights-only load builds tensors and plain data only, so runs no code of the
        # file's; the first object beyond those is named, the rest counted
        shown = (needs[0] + (f" +{len(needs) - 1}" if len(needs) > 1 else "")) if needs \
            else "unknown globals"
        raise SourceError(f"{path}: refused: not weights-only ({shown})") from None
    except (zipfile.BadZipFile, EOFError, RuntimeError, OSError) as err:
        raise SourceError(f"{path}: not a readable torch.save file "
                          f"({str(err).splitlines()[0] if str(err) else type(err).__name__})"
                          ) from None


def _reward(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, dict):
        if "score" not in value:
            raise SourceError(f"{where}: field 'reward' is a dict without 'score' "
                              f"(keys: {', '.join(map(str, value))})")
        value = value["score"]
    try:
        return float(value)
    except (TypeError, ValueError):
        raise SourceError(f"{where}: field 'reward' must be a number, got {value!r}") from None


def _versions(raw: list[Any], where: str) -> list[int]:
    """slime sends weight versions as strings ("1", "2"); SGLang's own "default"
    before the first update is left out."""
    out = []
    for v in raw:
        try:
            out.append(int(v))
        except (TypeError, ValueError):
            if v != "default":
                raise SourceError(f"{where}: weight_versions holds {v!r}, not a version "
                                  f"number") from None
    return out


def _calls(trace: Any, where: str) -> list[dict[str, Any]]:
    """The sample's engine requests in order: start and end stamps and end attributes
    (`sglang_generate` spans), with the reward check's span after the last, if any."""
    if trace is None:
        return []
    check(trace, "trace", "an object", where)
    starts: dict[str, float] = {}
    calls: list[dict[str, Any]] = []
    reward: list[float] = []
    for e in check(trace.get("events", []), "trace.events", "a list", where):
        name, kind = e.get("name"), e.get("type")
        if name in ("sglang_generate", "sglang_generate_stream"):
            if kind == "span_start":
                starts[e.get("span_id")] = need(e, "ts", "a number", f"{where} trace")
            elif kind == "span_end" and e.get("span_id") in starts:
                calls.append({"start": starts.pop(e["span_id"]),
                              "end": need(e, "ts", "a number", f"{where} trace"),
                              **e.get("attrs", {})})
        elif name == "reward_model" and kind in ("span_start", "span_end"):
            reward.append(need(e, "ts", "a number", f"{where} trace"))
    if calls and len(reward) >= 2:
        calls[-1]["reward_s"] = reward[-1] - reward[-2]
    return calls


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _server_times(call: dict[str, Any]) -> tuple[float | None, float | None]:
    """(admitted, first token) of one engine request, on the client's clock, from the
    server's own figures: SGLang's `e2e_latency` runs from the request's arrival to its
    finish and `queue_time` from entering the wait queue to the first forward, so the
    request arrived at end - e2e_latency and was admitted queue_time later (the span's
    start is the client's send, before the HTTP hop and any router queue: not the
    engine's); `decode_throughput` is completion_tokens over (finish - first token), so
    the first token came completion_tokens / decode_throughput before the finish.
    Followed: sgl-project/sglang@602413bc230f597e24cda749c7cc2f6ba92bff85,
    python/sglang/srt/observability/req_time_stats.py (`APIServerReqTimeStats.
    get_e2e_latency`, `convert_to_output_meta_info`; `SchedulerReqTimeStats.
    get_queueing_time`). Without `e2e_latency` the admission is the span's start plus
    `queue_time`, as before."""
    end, queue, e2e = call["end"], call.get("queue_time"), call.get("e2e_latency")
    admit = None
    if _number(queue):
        admit = end - e2e + queue if _number(e2e) else call["start"] + queue
    rate, made = call.get("decode_throughput"), call.get("completion_tokens")
    first = end - made / rate if _number(rate) and rate > 0 and _number(made) else None
    return admit, first


def _attempts(base: Sample, calls: list[dict[str, Any]], start_round: int | None
              ) -> list[Sample]:
    """The sample as attempts, one per stretch of engine requests ended by an abort."""
    def timed(s: Sample, first: dict[str, Any], last: dict[str, Any]) -> Sample:
        s.submit_s, s.finish_s = first["start"], last["end"]
        s.admit_s, s.first_token_s = _server_times(first)
        return s

    if start_round is None or start_round >= base.round:
        if calls:
            timed(base, calls[0], calls[-1])
            base.verify_s = calls[-1].get("reward_s")
        return [base]
    # carried over: split at the aborts, when every request says how many tokens it made
    if not calls or any(not isinstance(c.get("completion_tokens"), int) for c in calls):
        return [base]  # the split is unknown: counted whole where it was trained (`unsplit`)
    cut = [i for i, c in enumerate(calls) if c.get("finish_reason") == "abort"]
    if not cut:  # generated whole before its group was cut, and carried along
        base.round = start_round
        base.verify_s = calls[-1].get("reward_s")
        return [timed(base, calls[0], calls[-1])]
    out, done, begin = [], 0, 0
    for n, i in enumerate(cut):
        made = sum(c["completion_tokens"] for c in calls[begin:i + 1])
        part = Sample(where=base.where, round=min(start_round + n, base.round - 1),
                      group=base.group, index=base.index, prompt_tokens=base.prompt_tokens,
                      response_tokens=done + made, status="aborted",
                      versions=base.versions[:i + 1], carried_tokens=done)
        out.append(timed(part, calls[begin], calls[i]))
        done, begin = done + made, i + 1
    if begin < len(calls):
        base.carried_tokens = done
        timed(base, calls[begin], calls[-1])
        base.verify_s = calls[-1].get("reward_s")
        out.append(base)
    return out


def _sample(rec: Any, rnd: int, where: str) -> list[Sample]:
    if isinstance(rec, dict) and "group_index" in rec and rec["group_index"] is None:
        raise SourceError(f"{where}: group_index is null (an eval dump? slime names those "
                          f"eval_ID.pt)")
    group = need(rec, "group_index", "an integer", where)
    tokens = need(rec, "tokens", "a list", where)
    length = need(rec, "response_length", "an integer", where)
    status = need(rec, "status", "a string", where)
    if status not in FINISHED:
        raise SourceError(f"{where}: field 'status' must be one of {', '.join(FINISHED)}, "
                          f"got {status!r}")
    if length > len(tokens):
        raise SourceError(f"{where}: response_length ({length}) exceeds the tokens "
                          f"({len(tokens)})")
    meta = need(rec, "metadata", "an object", where)
    start = meta.get("start_rollout_id")
    base = Sample(where=where, round=rnd, group=group,
                  index=need(rec, "index", "an integer", where),
                  prompt_tokens=len(tokens) - length, response_tokens=length,
                  reward=_reward(rec.get("reward"), where), status=FINISHED[status],
                  truncated=status == "truncated",
                  versions=_versions(rec.get("weight_versions") or [], where))
    return _attempts(base, _calls(rec.get("trace"), where), start)


def unsplit(attempts: list[Sample], start: Any) -> bool:
    """A carried-over response kept as one attempt for want of per-request counts."""
    return isinstance(start, int) and len(attempts) == 1 and start < attempts[0].round


def _dumps(paths: list[Path]) -> list[tuple[int, Path, list[tuple[list[Sample], bool]]]]:
    """(rollout_id, path, its samples) of each dump in rollout order: a file's name says
    nothing (`10.pt` sorts before `2.pt`, and files may be named in any order), the
    `rollout_id` slime writes into each dump does. Each dump is parsed as it is loaded,
    so only one dump's tensors are in memory at a time; a sample comes with whether it
    is a carried-over response kept whole (`unsplit`)."""
    seen: dict[int, Path] = {}
    out = []
    for path in paths:
        data = load(path)
        rid = need(data, "rollout_id", "an integer", str(path))
        if rid in seen:
            raise SourceError(f"{path}: rollout_id {rid} again (also in {seen[rid]}): "
                              f"two runs' dumps mixed?")
        seen[rid] = path
        parsed = []
        for i, rec in enumerate(need(data, "samples", "a list", str(path))):
            attempts = _sample(rec, rid, f"{path} sample {i}")
            parsed.append((attempts, unsplit(attempts, rec["metadata"].get("start_rollout_id"))))
        out.append((rid, path, parsed))
        del data
    return sorted(out, key=lambda d: d[0])


def _outside(samples: list[Sample], trained: dict[int, int], rounds: set[int]
             ) -> tuple[list[Sample], int]:
    """The samples with each attempt that ran in a rollout not imported taken out of
    it: an aborted one goes (its tokens stay the next attempt's carried prefix); a
    member finished there and carried along whole stays in the rollout that trained
    it (`trained`: id -> that rollout), all of it carried, at that rollout's first
    submission of its group, else the rollout's first (slime hands a finished member
    back as soon as its group is resubmitted). Without this, one dump alone would
    build a round from its carried samples only."""
    own = [s for s in samples if s.round in rounds]
    first: dict[Any, float] = {}  # the first submission of a round, and of a round's group
    for t in own:
        if t.submit_s is not None:
            for key in (t.round, (t.round, t.group)):
                first[key] = min(first.get(key, t.submit_s), t.submit_s)
    orphans = [s for s in samples if s.round not in rounds and s.status == "finished"]
    for s in orphans:
        s.round = trained[id(s)]
        s.carried_tokens = s.response_tokens
        at = first.get((s.round, s.group), first.get(s.round))
        if s.timed and at is not None:
            s.submit_s = s.admit_s = s.finish_s = at
            s.first_token_s = None
    moved = len(samples) - len(own)
    return [s for s in samples if s.round in rounds], moved


def read(sources: list[Path]) -> Source:
    paths = [p for p in files(sources, PATTERN, "slime rollout dump (ID.pt)")
             if not p.name.startswith("eval_") and "_eval_" not in p.name
             and "train_data" not in p.parts]
    if not paths:
        raise SourceError(f"{', '.join(map(str, sources))}: only eval or train-data dumps; "
                          f"slime writes the rollouts to rollout_data/ID.pt")
    dumps = _dumps(paths)
    samples: list[Sample] = []
    trained: dict[int, int] = {}  # id(attempt) -> the rollout whose dump holds it
    whole = 0
    for rnd, _, parsed in dumps:
        for attempts, kept_whole in parsed:
            whole += kept_whole
            samples += attempts
            trained.update((id(a), rnd) for a in attempts)
    rounds = {rnd for rnd, _, _ in dumps}
    samples, moved = _outside(samples, trained, rounds)
    index = {}  # a group's samples by their global index, renumbered 0..K-1 per group
    for s in samples:
        index.setdefault(s.group, {}).setdefault(s.index, len(index.get(s.group, {})))
    for s in samples:
        s.index = index[s.group][s.index]
    notes = [f"{len(paths)} rollout dumps, in rollout_id order "
             f"({', '.join(str(r) for r, _, _ in dumps)})"]
    if moved:
        notes.append(f"{moved} attempts ran in rollouts not among these dumps: their tokens "
                     f"count as carried into the rollout that trained them")
    if whole:
        notes.append(f"{whole} carried-over responses without per-request token counts: "
                     f"counted whole in the rollout that trained them")
    lacks = ["trainer times (slime logs them, it does not dump them)",
             "groups the dynamic-sampling filter dropped (slime does not dump them)",
             "over-sampled groups aborted at a round's end (slime dumps the groups it "
             "trains: without --partial-rollout the aborted ones are dropped, with it they "
             "come back carried in a later dump, and the last rollout's never do)"]
    if not all(s.timed for s in samples):
        lacks.insert(0, "per-request times (no trace in the dump: slime before tracing)")
    return Source(format="slime", system="slime", files=[str(p) for _, p, _ in dumps],
                  samples=samples, lacks=lacks, notes=notes, versions="per request")
