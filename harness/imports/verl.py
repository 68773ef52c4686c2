"""veRL's rollout dump (`trainer.rollout_data_dir`): `{dir}/{global_step}.jsonl`.

Followed: volcengine/verl at b178a3cd56f58b2d502255daba591e92833930a7,
`verl/trainer/ppo/ray_trainer.py` (`_dump_generations`, called from
`_log_rollout_data`: one file per training step, one `json.dumps` object per
sample with `input` and `output`, the prompt and response decoded with special
tokens skipped, `gts`, `score` (the sequence reward) and `step`, then the
reward function's extra keys).

What it holds: per response its step, its prompt and response as text, and its
reward. What it lacks: token counts (counted here again with the tokenizer the
user names, a local folder: the decoded text lost its special tokens, so a
count may be a few tokens short), group ids (veRL keeps its `uid` out of the
dump, and its default `balance_batch` reorders the batch: a group is the
responses of one step with the same prompt text, so two identical prompts in
one batch merge), truncation, times (the file logger has per-step times; per
request there are none) and policy versions (veRL is synchronous: the round's).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.imports.fields import files, jsonl, need
from harness.imports.sample import Sample, Source, SourceError

PATTERN = "*.jsonl"


def tokenizer(path: Path | None) -> Callable[[str], int]:
    """Token count of a text, from a local tokenizer (a folder holding tokenizer.json,
    or the file itself); never a download."""
    if path is None:
        raise SourceError("veRL's dump holds text, not token counts: name the run's "
                          "tokenizer with --tokenizer DIR (a local folder with tokenizer.json)")
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
        raise SourceError(f"{path}: veRL names its dumps STEP.jsonl; this name is no "
                          f"step number") from None


def read(sources: list[Path], tokenizer_path: Path | None = None) -> Source:
    count = tokenizer(tokenizer_path)
    paths = sorted(files(sources, PATTERN, "veRL rollout dump"), key=_step)
    samples: list[Sample] = []
    validation_like = True
    for path in paths:
        step = _step(path)
        seen: dict[str, int] = {}
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
            samples.append(Sample(where=where, round=step, group=(step, prompt), index=index,
                                  prompt_tokens=count(prompt), response_tokens=count(output),
                                  reward=float(score)))
    notes = ["groups: the responses of one step with the same prompt text",
             "token counts: the decoded text counted again with the given tokenizer "
             "(special tokens were skipped when veRL decoded it)"]
    if validation_like and samples:
        notes.append("every line carries `reward` equal to `score`, as veRL's validation "
                     "dump (trainer.validation_data_dir) does: is this a validation dump?")
    return Source(format="verl", system="verl", files=[str(p) for p in paths],
                  samples=samples, notes=notes,
                  lacks=["per-request times", "verifier latency", "truncation",
                         "policy versions (synchronous: the round's)", "group ids"])
