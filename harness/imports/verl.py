"""veRL's rollout dump (`trainer.rollout_data_dir`): `{dir}/{global_step}.jsonl`, timed
by the run's `file`-logger metrics when they are given (harness.imports.verl_metrics).

Followed: volcengine/verl at b178a3cd56f58b2d502255daba591e92833930a7,
`verl/trainer/ppo/ray_trainer.py` (`_dump_generations`, called from
`_log_rollout_data`: one file per training step, one `json.dumps` object per
sample with `input` and `output`, the prompt and response decoded with special
tokens skipped, `gts`, `score` (the sequence reward) and `step`, then the
reward function's extra keys); unchanged at verl-project/verl@1dda039b
(`ray_trainer.py:454-477`, `_write_generations`).

What it holds: per response its step, its prompt and response as text, and its
reward. What it lacks: token counts (counted here again with the tokenizer the
user names, a local folder: the decoded text lost its special tokens and chat
template, so a count is short; with the metrics file the difference from veRL's
own means is said), group ids (veRL keeps its `uid` out of the dump, and its
default `balance_batch` reorders the batch: a group is the responses of one step
with the same prompt text, so two identical prompts in one batch merge),
truncation, per-request times (the metrics file has per-step phase times only)
and policy versions (veRL is synchronous: the round's).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.imports import verl_metrics
from harness.imports.fields import files, jsonl, need
from harness.imports.sample import Sample, Source, SourceError

PATTERN = "*.jsonl"


def tokenizer(path: Path | None) -> Callable[[str], int]:
    """Token count of a text, from a local tokenizer (a folder holding tokenizer.json,
    or the file itself); never a download."""
    if path is None:
        raise SourceError("veRL's dump holds text: count its tokens with --tokenizer DIR "
                          "(tokenizer.json's folder)")
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.exists():
        raise SourceError(f"--tokenizer: {file}: no such file (a folder holding "
                          f"tokenizer.json, or the file)")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise SourceError("--tokenizer: counting tokens needs the tokenizers package "
                          "(make setup-live installs it)") from None
    try:
        tok = Tokenizer.from_file(str(file))
    except Exception as err:  # the library raises its own exception types
        raise SourceError(f"--tokenizer: {file}: not a tokenizer ({err})") from None
    return lambda text: len(tok.encode(text, add_special_tokens=False).ids)


def _step(path: Path) -> int:
    try:
        return int(path.stem)
    except ValueError:
        # a dump's name is its step; the file logger's lines are {"step", "data"}
        raise SourceError(f"{path}: neither a dump (STEP.jsonl) nor veRL metrics") from None


def _split(sources: list[Path]) -> tuple[list[Path], list[Path]]:
    """(rollout dumps, metrics files): a dump is named by its step; any other .jsonl
    that holds file-logger records is the run's metrics (its name is the user's)."""
    dumps, metrics = [], []
    for path in files(sources, PATTERN, "veRL rollout dump"):
        if path.stem.isdigit():
            dumps.append(path)
        elif verl_metrics.is_metrics(path):
            metrics.append(path)
        else:
            _step(path)  # names the file
    if len(metrics) > 1:
        raise SourceError(f"{metrics[1]}: a second metrics file (also {metrics[0]}): "
                          f"give the run's one")
    if not dumps:
        raise SourceError(f"{', '.join(map(str, sources))}: no rollout dump (STEP.jsonl) "
                          f"beside the metrics: the metrics alone hold no responses")
    return sorted(dumps, key=_step), metrics


def read(sources: list[Path], tokenizer_path: Path | None = None) -> Source:
    count = tokenizer(tokenizer_path)
    paths, metrics_files = _split(sources)
    samples: list[Sample] = []
    counted: dict[int, tuple[list[int], list[int]]] = {}
    validation_like = True
    for path in paths:
        step = _step(path)
        seen: dict[str, int] = {}
        counted[step] = ([], [])
        for where, rec in jsonl(path):
            prompt = need(rec, "input", "a string", where)
            output = need(rec, "output", "a string", where)
            score = need(rec, "score", "a number", where)
            if need(rec, "step", "an integer", where) != step:
                raise SourceError(f"{where}: field 'step' is {rec['step']}, the file name "
                                  f"says step {step}")
            validation_like &= rec.get("reward") == score
            index = seen.get(prompt, 0)
            seen[prompt] = index + 1
            sample = Sample(where=where, round=step, group=(step, prompt), index=index,
                            prompt_tokens=count(prompt), response_tokens=count(output),
                            reward=float(score))
            counted[step][0].append(sample.prompt_tokens)
            counted[step][1].append(sample.response_tokens)
            samples.append(sample)
    notes = ["groups: the responses of one step with the same prompt text",
             "token counts: the decoded text counted again with the given tokenizer "
             "(special tokens were skipped when veRL decoded it)"]
    if validation_like and samples:
        notes.append("every line carries `reward` equal to `score`, as veRL's validation "
                     "dump (trainer.validation_data_dir) does: is this a validation dump?")
    lacks = ["per-request times", "verifier latency", "truncation",
             "policy versions (synchronous: the round's)", "group ids"]
    phases: dict[int, dict[str, float]] = {}
    if metrics_files:
        metrics = verl_metrics.read(metrics_files[0])
        phases = verl_metrics.phases(sorted(counted), metrics, metrics_files[0])
        for s in samples:  # veRL sends the whole batch at once; per request: unknown
            s.submit_s, s.finish_s = phases[s.round]["start"], phases[s.round]["gen_end"]
        checked = verl_metrics.token_check(counted, metrics)
        if checked:
            notes.append(checked)
        notes.append(f"round times from {metrics_files[0]} (timing_s/*): gen, reward, "
                     f"old_log_prob to update_actor (the trainer), update_weights; each "
                     f"request is put at its round's start and its generation's end")
        lacks[0] = ("per-request times (the metrics are per step: every request is put at "
                    "its round's start and its generation's end)")
    else:
        lacks[0] = ("per-request and round times (give the run's file-logger metrics, "
                    "trainer.logger=[file], to time the rounds)")
    return Source(format="verl", system="verl",
                  files=[str(p) for p in paths + metrics_files],
                  samples=samples, notes=notes, lacks=lacks, phases=phases, versions="none")
