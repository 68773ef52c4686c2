"""veRL's per-step metrics as its `file` logger writes them: the round-level times
of an imported veRL run, and veRL's own token counts to check the re-counted ones.

Followed: verl-project/verl at 1dda039b9c6311889a9c9a26040677e1254814f9,
`verl/utils/tracking.py:419-438` (`FileLogger`: `{"step": step, "data": metrics}`
one orjson line per `log` call, to `$VERL_FILE_LOGGER_PATH` or
`{VERL_FILE_LOGGER_ROOT}/{project}/{experiment}.jsonl`, so the name is the user's),
`verl/trainer/ppo/ray_trainer.py:1508-1720` (the step's `marked_timer` phases in
order: `gen`, `reward`, `old_log_prob`, `ref`, `values`, `adv`, `update_critic`,
`update_actor`, `save_checkpoint`, `update_weights`, all inside `step`; `testing`
after it; `logger.log(data=metrics, step=self.global_steps)` at :1802, the step the
rollout dump is named after) and `verl/trainer/ppo/metric_utils.py:573,589,645`
(`response_length/mean`, `prompt_length/mean`: tokens under the attention and
response masks, the chat template and EOS included; `timing_s/{name}` for each
phase). A validation before training is logged at step 0 with no `timing_s/step`.

What it gives: durations, not stamps. The file has no wall-clock time, so the
trace's clock is laid down from them: a step starts where the one before ended
(its `step` plus its `testing`), and its phases follow one another from its start
in veRL's order; time veRL does not time (between phases) falls after the last.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.imports.fields import check, jsonl, need
from harness.imports.sample import SourceError

# The step's timed phases in the order veRL runs them (ray_trainer.py:1510-1715).
ORDER = ("gen", "reward", "old_log_prob", "ref", "values", "adv", "update_critic",
         "update_actor", "save_checkpoint", "update_weights")
TRAIN = ("old_log_prob", "ref", "values", "adv", "update_critic", "update_actor")


def is_metrics(path: Path) -> bool:
    """The file's first line is a file-logger record ({"step": N, "data": {...}})."""
    try:
        with path.open("rb") as f:
            first = f.readline()
    except OSError:
        return False
    import msgspec

    try:
        rec = msgspec.json.decode(first)
    except msgspec.DecodeError:
        return False
    return isinstance(rec, dict) and set(rec) == {"step", "data"}


def read(path: Path) -> dict[int, dict[str, Any]]:
    """step -> its training metrics (the lines with `timing_s/step`; a step logged
    twice keeps the last)."""
    out: dict[int, dict[str, Any]] = {}
    for where, rec in jsonl(path):
        step = need(rec, "step", "an integer", where)
        data = need(rec, "data", "an object", where)
        if "timing_s/step" not in data:
            continue  # the validation before training (step 0), or another logger's line
        for key, value in data.items():
            if key.startswith("timing_s/"):
                check(value, key, "a number", where)
        check(data.get("timing_s/gen"), "timing_s/gen", "a number", where)
        out[step] = data
    if not out:
        raise SourceError(f"{path}: no training step in it (no line with timing_s/step): "
                          f"not veRL's file-logger metrics?")
    return out


def phases(steps: list[int], metrics: dict[int, dict[str, Any]], path: Path
           ) -> dict[int, dict[str, float]]:
    """step -> its phases on the trace's clock (seconds from the first step's start):
    start, gen_end, reward_end, train_start, train_end, published."""
    missing = [s for s in steps if s not in metrics]
    if missing:
        raise SourceError(f"{path}: no timing_s/step for step(s) "
                          f"{', '.join(map(str, missing[:6]))}: the metrics file of another "
                          f"run, or cut short?")
    out: dict[int, dict[str, float]] = {}
    first = steps[0]
    clock = 0.0
    for step in sorted(s for s in metrics if first <= s <= steps[-1]):
        data = metrics[step]
        took = {name: float(data.get(f"timing_s/{name}", 0.0)) for name in ORDER}
        t = clock
        at: dict[str, float] = {"start": t}
        for name in ORDER:
            if name == TRAIN[0]:
                at["train_start"] = t
            t += took[name]
            at[f"{name}_end"] = t
        out[step] = {"start": clock, "gen_end": at["gen_end"],
                     "reward_end": at["reward_end"], "train_start": at["train_start"],
                     "train_end": at["update_actor_end"],
                     "published": at["update_weights_end"]}
        clock += max(float(data["timing_s/step"]), t - clock)
        clock += float(data.get("timing_s/testing", 0.0))
    return {s: out[s] for s in steps}


def token_check(counted: dict[int, tuple[list[int], list[int]]],
                metrics: dict[int, dict[str, Any]]) -> str | None:
    """The mean difference, per prompt and per response, between the re-counted
    tokens and veRL's own `prompt_length/mean` and `response_length/mean`."""
    prompt, response, n = 0.0, 0.0, 0
    for step, (prompts, responses) in counted.items():
        data = metrics.get(step, {})
        if not prompts or "prompt_length/mean" not in data or "response_length/mean" not in data:
            continue
        prompt += sum(prompts) / len(prompts) - float(data["prompt_length/mean"])
        response += sum(responses) / len(responses) - float(data["response_length/mean"])
        n += 1
    if not n:
        return None
    return (f"token counts against veRL's own (prompt_length/mean, response_length/mean, "
            f"{n} steps): {prompt / n:+.1f} tokens a prompt, {response / n:+.1f} a response "
            f"(the decoded text lost the chat template and special tokens; the trace keeps "
            f"the re-counted figures)")
