"""`rolloutbench import slime-perf`: slime's per-step timing keys (`perf/*`) as its W&B
history holds them, the synchronous loop's rounds and trainer laid down from them.

Followed at THUDM/slime@624b824a898ab0ec1fcb4d373004c7f3852bf515:
- how a key is made: one `Timer` per process sums the seconds of each named block
  (slime/observability/timer.py:15-52, `timer` :55-80); the actor's `log_perf_data`
  logs every sum as `perf/{name}_time`, then empties them
  (slime/observability/train_metric_utils.py:358-376), at the end of each training
  step (slime/backends/megatron_utils/actor.py:564-568), so a step's record holds what
  ran since the last one's;
- the step: `rollout/step`, the rollout id (slime/observability/metric_utils.py:120-123,
  `compute_rollout_step`), logged with each record (train_metric_utils.py:403-405;
  the rollout's record, slime/observability/rollout_metrics.py:269-271); W&B plots
  `perf/*` against it (slime/observability/wandb_utils.py:176). slime logs to W&B and
  TensorBoard only (slime/observability/logging_utils.py:45-51): this reads W&B's
  history, written out;
- the keys read, in the synchronous loop's order (train.py:49-85):
  `perf/update_weights_time`, the push of the weights to the engines
  (actor.py:595-596), after the last step's training (train.py:85; the first before
  the loop, train.py:27), so logged with the step it serves;
  `perf/save_model_time`, the checkpoint before that push (actor.py:570-571,
  train.py:71-80);
  `perf/rollout_time`, the rollout manager's `generate` from its call to its log,
  rewards included (slime/ray/rollout.py:492-506, rollout_metrics.py:59-63);
  `perf/train_wait_time`, from the end of the last step's training block to the
  start of this one's (started when `init` returns, actor.py:59; paused during the
  block by `inverse_timer`, actor.py:433, timer.py:83-89);
  `perf/train_time`, the training block: reference and old log-probs, advantages and
  the optimizer's steps (actor.py:433-543; within it `perf/ref_log_probs_time`,
  `perf/log_probs_time` actor.py:363, `perf/actor_train_time` actor.py:524);
  `perf/step_time` is `train_wait + train`, from one block's end to the next's
  (train_metric_utils.py:395-399), and is not needed.

What it gives: durations, not stamps, as veRL's `timing_s/*` (harness.imports.
verl_metrics). The clock starts where the first step's wait does; step N's training
block ends `train_wait + train` after the last one's and starts `train` before
that, its data fetched `data_preprocess` before (actor.py:381). In train.py's loop its
rollout starts when its weights are pushed (`save_model` then `update_weights` after
the last block) and lasts `rollout_time`; the rest of the wait falls between the
rollout's end and the fetch: what slime does not time (the engines' offload and
onload, Ray's calls) and what this leaves unplaced, `perf/sleep_time` and
`perf/wake_up_time` (the trainer's offload, actor.py:205-244, also counted inside
`save_model` when it wakes the trainer to save, actor.py:575-593). Where a step's push
and rollout do not fit before its fetch, the run was train_async.py's (train_async.py:
32-70): step N's rollout was launched as step N - 1 began (at its fetch) and must be
back by step N's fetch, and the push after step N waits for step N + 1's rollout;
neither fitting is refused, naming the step. The last step's push is logged nowhere
(its weights are published at its training's end). Steps a fixed stride apart (3 or
more) are `--wandb-always-use-train-step`'s optimizer steps, one rollout each; any
other gap is a missing step, refused. The keys are per step: a round's generation is
one sample of 0 tokens.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from harness.imports.fields import files, jsonl
from harness.imports.sample import Sample, Source, SourceError
from workloads.polytrace import STEP_FILE

STEP = "rollout/step"
NEED = ("perf/rollout_time", "perf/train_wait_time", "perf/train_time")
PUSH = ("perf/save_model_time", "perf/update_weights_time")  # before a rollout, in order
FETCH = "perf/data_preprocess_time"  # the trainer fetching the rollout's data
SLACK = 1e-3  # seconds: two processes' timers, and an export's rounding

Keys = dict[int, dict[str, tuple[float, str]]]  # step -> key -> (seconds, "FILE:LINE")


def _rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """("FILE:LINE", row) of a JSON-lines history (`scan_history()` rows, one object a
    line) or a CSV one (`history().to_csv()`, W&B's export: a header, empty cells)."""
    if path.suffix == ".jsonl":
        out = []
        for where, row in jsonl(path, nan=True):
            if not isinstance(row, dict):
                raise SourceError(f"{where}: expected an object (a W&B history row), got "
                                  f"{type(row).__name__}")
            out.append((where, row))
        return out
    if path.suffix != ".csv":
        raise SourceError(f"{path}: a W&B history export is .jsonl (rows as JSON) or .csv")
    try:
        text = path.read_text(encoding="utf-8-sig")  # a spreadsheet's export starts with a BOM
    except (OSError, UnicodeDecodeError) as err:
        raise SourceError(f"{path}: cannot read ({getattr(err, 'strerror', None) or err})"
                          ) from None
    reader = csv.reader(text.splitlines())
    header = next(reader, None)
    if not header:
        raise SourceError(f"{path}: empty (a CSV export starts with its header of keys)")
    rows = []
    for line, cells in enumerate(reader, start=2):
        if len(cells) != len(header):
            raise SourceError(f"{path}:{line}: {len(cells)} cells, the header has "
                              f"{len(header)}")
        rows.append((f"{path}:{line}", {k: _cell(v) for k, v in zip(header, cells,
                                                                     strict=True) if v}))
    return rows


def _cell(text: str) -> Any:
    """A CSV cell as the number it holds, else its text (checked where it is used)."""
    try:
        return float(text)
    except ValueError:
        return text


def _seconds(row: dict[str, Any], key: str, where: str) -> float | None:
    """A timing key's seconds; absent, empty or NaN (a history's gap) is None."""
    value = row.get(key)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 \
            or math.isinf(value):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise SourceError(f"{where}: field {key!r} must be seconds (a number >= 0), got "
                          f"{shown}")
    return float(value)


def _step(row: dict[str, Any], where: str) -> int | None:
    value = row.get(STEP)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not float(value).is_integer() or value < 0:
        raise SourceError(f"{where}: field {STEP!r} must be a whole number >= 0, got "
                          f"{value!r}")
    return int(value)


def _stride(order: list[int]) -> int:
    """The steps' one difference when every difference is the same and there are 3 steps
    or more, else 1 (two steps 2 apart may as well be one missing between them)."""
    diffs = {b - a for a, b in zip(order, order[1:], strict=False)}
    return diffs.pop() if len(diffs) == 1 and len(order) >= 3 else 1


def steps(path: Path) -> tuple[Keys, list[int]]:
    """step -> key -> (seconds, "FILE:LINE"), the step's rows merged (the rollout's and
    the trainer's records are rows of their own); a key logged twice keeps the last. And
    the steps after the last trained one that logged a rollout (a run stopped mid-step):
    left out, said in a note."""
    out: Keys = {}
    for where, row in _rows(path):
        step = _step(row, where)
        if step is None:
            continue  # eval/step's rows, W&B's system rows
        keys = out.setdefault(step, {})
        for key in (*NEED, *PUSH, FETCH):
            seconds = _seconds(row, key, where)
            if seconds is not None:
                keys[key] = (seconds, where)
    trained = {s: k for s, k in out.items() if "perf/train_time" in k}
    if not trained:
        raise SourceError(f"{path}: no step with perf/train_time and {STEP}"
                          f"{_polytrace(path) or ': not slime W&B history?'}")
    # one rollout a step, or a fixed stride over 3 steps or more: --wandb-always-use-
    # train-step logs the optimizer step, rollout_id x rollout batch / global batch
    # (metric_utils.py:120-123); any other gap is a missing step
    order = sorted(trained)
    stride = _stride(order)
    gaps = [s for s in range(order[0], order[-1] + 1, stride) if s not in trained]
    if gaps:
        which = f"step {gaps[0]} lacks" if len(gaps) == 1 else f"{len(gaps)} steps lack"
        # history() samples 500 rows; scan_history() gives them all (docs/import.md)
        raise SourceError(f"{path}: {which} perf/train_time: use scan_history")
    for step, keys in trained.items():
        missing = [k for k in NEED if k not in keys]
        if missing:
            raise SourceError(f"{keys['perf/train_time'][1]}: step {step} has no "
                              f"{missing[0]}")
    return trained, [s for s in sorted(out) if s > order[-1] and "perf/rollout_time" in out[s]]


def _layout(trained: Keys, overlap: bool) -> tuple[dict[int, dict[str, float]], str]:
    """(step -> its phases, '') on the laid-down clock (seconds from the first step's
    wait): start, gen_end, dispatch, train_start, train_end, published; or the first
    step whose rollout does not come back before its training's data is fetched (its
    `data_preprocess`), as a line. `overlap`: train_async.py's loop, where a step's
    rollout is launched as the step before begins (train_async.py:32-40, before its
    `train`, :53), and a push waits for the next rollout (:66-70); else train.py's."""
    out: dict[int, dict[str, float]] = {}
    clock = 0.0  # the end of the last step's training block
    launch = None  # train_async.py: when the next rollout was launched
    for step in sorted(trained):
        keys = {k: v for k, (v, _) in trained[step].items()}
        end = clock + keys["perf/train_wait_time"] + keys["perf/train_time"]
        train_start = end - keys["perf/train_time"]
        fetched = train_start - keys.get(FETCH, 0.0)
        start = launch if overlap and launch is not None else \
            clock + sum(keys.get(k, 0.0) for k in PUSH)
        gen_end = start + keys["perf/rollout_time"]
        if gen_end > fetched + SLACK:
            return {}, (f"{trained[step]['perf/train_wait_time'][1]}: step {step}'s rollout "
                        f"ends {gen_end - fetched:.3f} s after its data was fetched")
        out[step] = {"start": start, "gen_end": min(gen_end, fetched),
                     "dispatch": min(gen_end, fetched), "train_start": train_start,
                     "train_end": end, "published": end}
        launch, clock = fetched, end
    order = sorted(trained)
    for step, after in zip(order, order[1:], strict=False):  # the push logged with `after`
        keys = {k: v for k, (v, _) in trained[after].items()}
        if "perf/update_weights_time" in keys:  # else none that step (an interval)
            ready = out[step]["train_end"] + keys.get("perf/save_model_time", 0.0)
            if overlap:
                ready = max(ready, out[after]["gen_end"])
            out[step]["published"] = ready + keys["perf/update_weights_time"]
    return out, ""


def phases(trained: Keys) -> tuple[dict[int, dict[str, float]], bool]:
    """(step -> its phases, whether train_async.py's loop ran): train.py's where every
    step's push and rollout fit in its wait, else train_async.py's where every rollout
    is back in time; neither fitting is a SourceError naming the first step that does
    not fit train.py's."""
    laid, misfit = _layout(trained, overlap=False)
    if not misfit:
        return laid, False
    laid, other = _layout(trained, overlap=True)
    if other:
        raise SourceError(f"{misfit} (train.py's loop; train_async.py's fits no better)")
    return laid, True


def read(sources: list[Path]) -> Source:
    """The rounds and trainer of one run's W&B history."""
    paths: list[Path] = []
    for src in sources:
        if src.is_dir():
            found = sorted(p for p in src.iterdir() if p.suffix in (".jsonl", ".csv"))
            if not found:
                raise SourceError(f"{src}: no W&B history export in this folder (looked for "
                                  f"*.jsonl, *.csv)")
            paths += found
        else:
            paths += files([src], "", "")
    if len(paths) != 1:
        where = paths[0] if len(sources) > 1 or not sources[0].is_dir() else sources[0]
        raise SourceError(f"{where}: {len(paths)} files, not one: PolyTrace's? import polytrace"
                          if _polytrace(paths[0]) else
                          f"{where}: {len(paths)} files; slime-perf reads one W&B history file")
    trained, untrained = steps(paths[0])
    laid, overlapped = phases(trained)
    samples = [Sample(where=f"{paths[0]} step {step}", round=step, group=step, index=0,
                      prompt_tokens=0, response_tokens=0, submit_s=p["start"],
                      finish_s=p["gen_end"], verify_s=0.0)
               for step, p in laid.items()]
    notes = ["a round's generation is one sample of 0 tokens (K = 1) lasting "
             "perf/rollout_time",
             "the clock is laid down from durations: the time slime does not time falls "
             "between a rollout's end and its training's data fetch"]
    if overlapped:
        notes.append("train_async.py's loop (a rollout longer than its step's wait): each "
                     "rollout runs while the step before trains, on the weights one step "
                     "older, though the trace puts the round's version")
    stride = _stride(sorted(laid))
    if stride > 1:
        notes.append(f"rollout/step advances by {stride} (--wandb-always-use-train-step: "
                     f"optimizer steps): each logged step is one rollout")
    if untrained:
        notes.append(f"step(s) {', '.join(map(str, untrained))}: a rollout and no training "
                     f"logged after it (the run stopped mid-step?): left out")
    lacks = ["token counts, requests and groups (the keys are per step)", "rewards",
             "policy versions", "truncation", "the last step's weight push (logged nowhere)"]
    return Source(format="slime-perf", system="slime", files=[str(paths[0])],
                  samples=samples, lacks=lacks, notes=notes, phases=laid)


def _polytrace(path: Path) -> str:
    """A hint where a file is named as PolyTrace's step files are (a user's likely mix-up:
    both are .jsonl rows a step)."""
    return " (PolyTrace's? import polytrace)" if STEP_FILE.search(path.name) else ""
