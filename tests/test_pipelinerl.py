"""PipelineRL's invariants on simulated traces."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.config import RunConfig
from harness.core.trace import read_trace
from harness.run.execute import execute


def run(tmp_path: Path, max_lag: int, **over: object) -> list[dict]:
    cfg = RunConfig(system="pipelinerl", workload="sci-jl", groups=8, update_groups=2,
                    rounds=2, concurrency=32, max_lag=max_lag)
    for key, value in over.items():
        setattr(cfg, key, value)
    path = tmp_path / f"lag{max_lag}.jsonl"
    execute(cfg.validate(), path)
    return read_trace(path)


@pytest.mark.parametrize("max_lag", [-1, 0, 2])
def test_versions_rise_by_one_and_every_group_is_trained_once(tmp_path: Path,
                                                              max_lag: int) -> None:
    events = run(tmp_path, max_lag)
    steps = [e for e in events if e["ev"] == "optimizer_step"]
    assert [e["version"] for e in steps] == list(range(1, 9))  # 2 rounds x 8/2 steps
    trained = [g for e in events if e["ev"] == "batch_dispatch" for g in e["groups"]]
    submitted = {e["group"] for e in events if e["ev"] == "request_submit"}
    assert sorted(trained) == sorted(submitted)  # each exactly once, none left over
    finishes = [e for e in events if e["ev"] == "request_finish"]
    assert all(e["status"] == "finished" for e in finishes)
    assert len(finishes) == 16 * 8
    published = [e["version"] for e in events if e["ev"] == "weights_published"]
    assert published == list(range(1, 9))  # in flight, after every step


@pytest.mark.parametrize("max_lag", [0, 1, 3])
def test_lag_never_exceeds_max_lag(tmp_path: Path, max_lag: int) -> None:
    events = run(tmp_path, max_lag)
    lags = [e["lag_max"] for e in events if e["ev"] == "optimizer_step"]
    assert max(lags) <= max_lag
    if max_lag == 0:  # synchronous: every token on the version being updated
        assert all(e["ess"] == 1.0 for e in events if e["ev"] == "optimizer_step")


def test_in_flight_updates_mix_versions_within_a_response(tmp_path: Path) -> None:
    events = run(tmp_path, -1)
    spans = [e["version_spans"] for e in events if e["ev"] == "request_finish"]
    assert any(len(s) > 1 for s in spans)  # some responses straddle a weight update
    for s in spans:  # versions within a response only go up
        versions = [v for v, _ in s]
        assert versions == sorted(versions)
