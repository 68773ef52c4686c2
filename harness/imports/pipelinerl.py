"""PipelineRL's actor stream: `<output_dir>/streams/actor/0/0/0.jsonl`.

Followed: ServiceNow/PipelineRL at 58d393458625ad63ed539f2dcd072c85700c557f,
`pipelinerl/actor.py` (`ActorLoop._run` writes one line per group: the list of
its `TrainingText.model_dump()`s), `pipelinerl/rollouts.py` (`TrainingText`),
`pipelinerl/async_llm.py` (`make_training_text`: `prompt_tokens` and
`output_tokens` are vLLM's usage counts, `finished` is `finish_reason !=
"length"`) and `pipelinerl/streams.py` (orjson, one value per line).

What it holds: per response its group (`group_id`), its place in the group
(`metadata.rollout_index`), its token counts, reward, whether it stopped at the
cap, and `metadata.model_version`, the weights when its rollout began, counted
in *samples trained* (0, B, 2B, ... for B samples per optimizer step). What it
lacks: any time (the rollout's latency is dropped before writing), verifier
latency, and the versions a response crossed (vLLM pauses a running request for
an update and resumes it on the new weights; only the first version is kept).

Rounds: a response's round is the optimizer step of its starting weights,
model_version / B, with B the greatest common divisor of the versions seen (the
samples per step, when at least one update was seen).
"""

from __future__ import annotations

import math
from pathlib import Path

from harness.imports.fields import files, jsonl, need
from harness.imports.sample import Sample, Source, SourceError

PATTERN = "**/actor/*/*/*.jsonl"


def read(sources: list[Path]) -> Source:
    paths = files(sources, PATTERN, "PipelineRL actor stream", "**/*.jsonl")
    rollouts: dict[tuple[str, int], list[tuple[str, dict]]] = {}
    order: list[tuple[str, int]] = []
    for path in paths:
        for where, line in jsonl(path):
            if not isinstance(line, list):
                raise SourceError(f"{where}: expected a list of samples (one group per line), "
                                  f"got {type(line).__name__}: not a PipelineRL actor stream?")
            for i, text in enumerate(line):
                at = f"{where} sample {i}"
                group = need(text, "group_id", "a string", at)
                meta = need(text, "metadata", "an object", at)
                rollout = need(meta, "rollout_index", "an integer", f"{at} metadata")
                key = (group, rollout)
                if key not in rollouts:
                    rollouts[key] = []
                    order.append(key)
                rollouts[key].append((at, text))
    samples: list[Sample] = []
    versions: list[int] = []
    multi = 0
    for key in order:
        steps = sorted(rollouts[key], key=lambda p: need(p[1]["metadata"], "step_index",
                                                         "an integer", f"{p[0]} metadata"))
        multi += len(steps) > 1
        at, first = steps[0]
        version = need(first["metadata"], "model_version", "an integer", f"{at} metadata")
        versions.append(version)
        out = sum(need(t, "output_tokens", "an integer", a) for a, t in steps)
        samples.append(Sample(
            where=at, round=version, group=key[0], index=key[1],
            prompt_tokens=need(first, "prompt_tokens", "an integer", at),
            response_tokens=out, reward=float(need(steps[-1][1], "reward", "a number", at)),
            truncated=not all(need(t, "finished", "a boolean", a) for a, t in steps),
            versions=[version]))
    per_step = math.gcd(*versions) if any(versions) else 1
    for s in samples:
        s.round = s.round // per_step
        s.versions = [s.round]
    notes = [f"model_version counts samples trained: {per_step} per optimizer step "
             f"(the greatest common divisor of the versions seen)"]
    if multi:
        notes.append(f"{multi} multi-step rollouts: each is one response, its steps' "
                     f"output tokens summed")
    return Source(format="pipelinerl", system="pipelinerl", files=[str(p) for p in paths],
                  samples=samples, notes=notes, versions="first",
                  lacks=["per-request times", "verifier latency",
                         "versions after the first (in-flight updates)", "response cap"])
