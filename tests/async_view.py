"""Reading an asynchronous system's trace for its tests: runs, group starts with the
weights then in the engine, batches, and a small live run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.config import RunConfig
from harness.core.trace import read_trace
from harness.run.execute import execute


def configure(cfg: RunConfig, over: dict[str, Any]) -> RunConfig:
    """Set fields by dotted name (`areal.max_head_offpolicyness`) and validate."""
    for key, value in over.items():
        obj = cfg
        *path, last = key.split(".")
        for part in path:
            obj = getattr(obj, part)
        setattr(obj, last, value)
    return cfg.validate()


def sim_run(tmp_path: Path, system: str, **over: Any) -> list[dict[str, Any]]:
    """The small simulated config of these tests: sci-jl, R = 8, U = 2, 2 rounds."""
    cfg = configure(RunConfig(system=system, workload="sci-jl", groups=8, update_groups=2,
                              rounds=2), {k.replace("__", "."): v for k, v in over.items()})
    path = tmp_path / f"{system}.jsonl"
    execute(cfg, path)
    return read_trace(path)


def live_run(model_dir: Path, system: str, out: Path, **over: Any) -> list[dict[str, Any]]:
    """tests/test_live.py's small live config (arith, 4 groups x 4, 2 rounds, 32 tokens)."""
    cfg = RunConfig(system=system, workload="arith", runtime="live", groups=4, group_size=4,
                    update_groups=2, rounds=2, max_response_tokens=32)
    cfg.live.model_dir = str(model_dir)
    cfg.live.ray_address = "off"
    path = out / f"{system}.jsonl"
    execute(configure(cfg, {k.replace("__", "."): v for k, v in over.items()}), path)
    return read_trace(path)


@dataclass
class Start:
    """A group's first request: its place in the trace and the weights then served."""

    index: int  # position in the trace
    group: int
    order: int  # 0, 1, ...: the order groups started in
    version: int  # weights_published events before it
    done_before: int  # groups materialised before it


def starts(events: list[dict[str, Any]]) -> list[Start]:
    out: list[Start] = []
    seen: set[int] = set()
    version = done = 0
    for i, e in enumerate(events):
        if e["ev"] == "weights_published":
            version += 1
        elif e["ev"] == "group_materialized":
            done += 1
        elif e["ev"] == "request_submit" and e["group"] not in seen:
            seen.add(e["group"])
            out.append(Start(i, e["group"], len(out), version, done))
    return out


def batches(events: list[dict[str, Any]]) -> list[tuple[int, list[int]]]:
    """(trace position, groups) of each batch dispatch, in order."""
    return [(i, list(e["groups"])) for i, e in enumerate(events) if e["ev"] == "batch_dispatch"]


def lags(events: list[dict[str, Any]]) -> list[float]:
    return [e["lag_max"] for e in events if e["ev"] == "optimizer_step"]


def complete_untrained(events: list[dict[str, Any]], at: int) -> set[int]:
    """Groups materialised before trace position `at` and not yet dispatched."""
    done = {e["group"] for e in events[:at] if e["ev"] == "group_materialized"}
    trained = {g for e in events[:at] if e["ev"] == "batch_dispatch" for g in e["groups"]}
    return done - trained
