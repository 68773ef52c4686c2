"""Reading the asynchronous systems' traces in their tests: the lag of every
trained token, the groups dropped, the backlog of finished-but-untrained groups
and the sample throughput, computed from the events alone."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from harness.core.config import RunConfig
from harness.core.trace import read_trace
from harness.run.execute import execute


def run(system: str, tmp: Path, **knobs: Any) -> list[dict]:
    """A small simulated run: 8 groups of 8 a round, U = 2, 3 rounds; `knobs` by
    dotted name (`skyrl.max_staleness_steps=1`)."""
    cfg = RunConfig(system=system, workload="sci-jl", groups=8, group_size=8, update_groups=2,
                    rounds=3, seed=5)
    for name, value in knobs.items():
        table, field = name.split("__") if "__" in name else (None, name)
        setattr(getattr(cfg, table) if table else cfg, field, value)
    path = tmp / f"{system}.jsonl"
    execute(cfg.validate(), path)
    return read_trace(path)


def token_lags(events: list[dict]) -> Counter[int]:
    """Tokens trained, by lag: the trainer's version when their batch is dispatched
    minus the version that generated them."""
    spans: dict[int, list[list[int]]] = {}
    for e in events:
        if e["ev"] == "request_finish" and e["status"] == "finished":
            spans.setdefault(e["group"], []).extend(e["version_spans"])
    lags: Counter[int] = Counter()
    version = 0
    for e in events:
        if e["ev"] == "optimizer_step":
            version = e["version"]
        elif e["ev"] == "batch_dispatch":
            for g in e["groups"]:
                for v, n in spans[g]:
                    lags[version - v] += n
    return lags


def dropped(events: list[dict]) -> list[int]:
    return [e["group"] for e in events if e["ev"] == "decision" and e["what"] == "drop_group"]


def trained(events: list[dict]) -> list[int]:
    return [g for e in events if e["ev"] == "batch_dispatch" for g in e["groups"]]


def max_backlog(events: list[dict]) -> int:
    """The most groups finished (materialised) and not yet dispatched at once."""
    ready: set[int] = set()
    most = 0
    for e in events:
        if e["ev"] == "group_materialized":
            ready.add(e["group"])
            most = max(most, len(ready))
        elif e["ev"] == "batch_dispatch":
            ready -= set(e["groups"])
    return most


def throughput(events: list[dict]) -> float:
    """Trained samples per second of the run."""
    samples = sum(e["samples"] for e in events if e["ev"] == "train_start")
    return samples / events[-1]["t"]
