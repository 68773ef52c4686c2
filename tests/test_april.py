"""APRIL's invariants on simulated traces."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import RunConfig
from harness.trace import read_trace
from systems.april import APRIL


def run(tmp_path: Path, **over: object) -> tuple[list[dict], APRIL]:
    cfg = RunConfig(system="april", workload="sci-jl", groups=8, update_groups=8, rounds=4,
                    over_sampling_groups=16)
    for key, value in over.items():
        setattr(cfg, key, value)
    from harness.sim.runtime import SimRuntime

    system = APRIL()
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "trace.jsonl"
    SimRuntime(cfg.validate(), path).run(system)
    return read_trace(path), system


@pytest.mark.parametrize("dynamic", [False, True])
def test_each_step_trains_exactly_r_groups_once(tmp_path: Path, dynamic: bool) -> None:
    events, _ = run(tmp_path, dynamic_sampling=dynamic)
    batches = [e["groups"] for e in events if e["ev"] == "batch_dispatch"]
    assert len(batches) == 4 and all(len(b) == 8 for b in batches)
    trained = [g for b in batches for g in b]
    assert len(trained) == len(set(trained))
    steps = [e for e in events if e["ev"] == "optimizer_step"]
    assert [e["version"] for e in steps] == [1, 2, 3, 4]


def test_no_partial_response_is_lost(tmp_path: Path) -> None:
    events, system = run(tmp_path)
    aborted = {(e["group"], e["sample"]): e["response_tokens"] for e in events
               if e["ev"] == "request_finish" and e["status"] == "aborted"}
    assert aborted, "over-sampling should abort something"
    finished = {(e["group"], e["sample"]): e for e in events
                if e["ev"] == "request_finish" and e["status"] == "finished"}
    held = {(w.group.id, s): r.tokens for w in system.carried for s, r in w.partial.items()}
    for key, tokens in aborted.items():
        if tokens == 0:
            continue  # never admitted: nothing to keep, it restarts
        if key in finished:
            # resumed later: the finished response starts with the kept tokens
            assert finished[key]["response_tokens"] > tokens
        else:
            assert key in held and held[key] >= tokens  # still held when the run ends
    resumed = [e for e in events if e["ev"] == "request_submit" and e["resumed_tokens"] > 0]
    assert resumed, "partial responses must be resumed"


def test_carried_tokens_are_off_policy(tmp_path: Path) -> None:
    events, _ = run(tmp_path)
    spans = [e["version_spans"] for e in events
             if e["ev"] == "request_finish" and e["status"] == "finished"]
    assert any(len(s) > 1 for s in spans)  # finished across a weight update
    without, _ = run(tmp_path / "b", partial_rollout=False)
    spans = [e["version_spans"] for e in without
             if e["ev"] == "request_finish" and e["status"] == "finished"]
    assert all(len(s) == 1 for s in spans)  # discarding keeps everything on-policy


def test_standard_config_is_synchronous(tmp_path: Path) -> None:
    events, _ = run(tmp_path, over_sampling_groups=0, partial_rollout=False)
    assert not [e for e in events if e["ev"] == "request_finish" and e["status"] == "aborted"]
