"""Small hand-built traces for tests/test_check.py: each reproduces a reported bug
in a scheduler, and its mended twin.

`pipeline` runs a one-line admission rule step by step: at the start of each step
(1 s long) it submits the groups the rule admits, on the engine's current version;
they finish half a step later with `tokens` each; the trainer then takes the oldest
`per_step` complete groups, trains them until the step's end, steps and publishes.
The rule sees the version, the groups started, assembled (finished) and consumed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

HEAD = {"t": 0.0, "ev": "run_start", "schema": 2, "runtime": "import", "seed": 0,
        "version": "test", "workload": "hand-built"}


def head(system: str, **config: Any) -> dict[str, Any]:
    return {**HEAD, "system": system, "config": config}


def submit_group(out: list[dict[str, Any]], t: float, rnd: int, gid: int, k: int) -> None:
    for s in range(k):
        out.append({"t": t, "ev": "request_submit", "round": rnd, "group": gid, "sample": s,
                    "prompt_tokens": 10})


def finish_group(out: list[dict[str, Any]], t: float, gid: int, k: int, version: int,
                 tokens: int | list[int]) -> None:
    lengths = tokens if isinstance(tokens, list) else [tokens] * k
    for s, n in enumerate(lengths):
        out.append({"t": t, "ev": "request_finish", "group": gid, "sample": s,
                    "response_tokens": n, "status": "finished", "versions": [version, version],
                    "version_spans": [[version, n]]})
    out.append({"t": t, "ev": "group_complete", "group": gid})
    out.append({"t": t, "ev": "group_materialized", "group": gid})


Rule = Callable[[dict[str, int]], int]


def pipeline(rule: Rule, steps: int, per_step: int, k: int = 2, v0: int = 0,
             tokens: int = 10, system: str = "areal") -> list[dict[str, Any]]:
    events = [head(system, groups=per_step, group_size=k), {
        "t": 0.0, "ev": "rollout_start", "round": 0, "version": v0}]
    state = {"version": v0, "started": 0, "assembled": 0, "consumed": 0}
    ready: list[int] = []
    for step in range(steps):
        t = float(step)
        new = list(range(state["started"], state["started"] + max(0, rule(state))))
        for gid in new:
            submit_group(events, t, 0, gid, k)
        state["started"] += len(new)
        for gid in new:
            finish_group(events, t + 0.5, gid, k, state["version"], tokens)
        state["assembled"] += len(new)
        ready += new
        if len(ready) >= per_step:
            batch, ready[:per_step] = ready[:per_step], []
            state["consumed"] += per_step
            events += [
                {"t": t + 0.5, "ev": "batch_dispatch", "batch": step, "groups": batch},
                {"t": t + 0.5, "ev": "train_start", "batch": step},
                {"t": t + 1.0, "ev": "train_end", "batch": step},
                {"t": t + 1.0, "ev": "optimizer_step", "step": step + 1,
                 "version": state["version"] + 1}]
            state["version"] += 1
            events.append({"t": t + 1.0, "ev": "weights_published",
                           "version": state["version"]})
    events.append({"t": float(steps), "ev": "run_end"})
    return events


def write(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def phases(groups_per_phase: list[int], k: int = 16, tokens: int = 100,
           length: float = 10.0) -> list[dict[str, Any]]:
    """A timed trace of phases `length` s long between weight publications; phase i
    runs `groups_per_phase[i]` groups, each request generating `tokens` over the
    whole phase."""
    events = [head("prime-rl", groups=1, group_size=k),
              {"t": 0.0, "ev": "rollout_start", "round": 0, "version": 0}]
    gid = 0
    for i, n in enumerate(groups_per_phase):
        a = i * length
        if i:
            events.append({"t": a, "ev": "weights_published", "version": i})
        for g in range(gid, gid + n):
            submit_group(events, a, 0, g, k)
        for g in range(gid, gid + n):
            finish_group(events, a + length, g, k, i, tokens)
        gid += n
    events.append({"t": len(groups_per_phase) * length, "ev": "run_end"})
    return events
