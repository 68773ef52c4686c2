"""tinker's rules (cookbook PR #822) on simulated traces (sci-jl, R = 8, U = 2, 2 rounds:
8 steps, 16 groups), and one small live run."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.config import ConfigError, RunConfig
from systems.tinker import Tinker
from tests.async_view import batches, complete_untrained, configure, lags, live_run, sim_run, starts

U = 2


def start_versions(events: list[dict]) -> list[tuple[int, list[int]]]:
    """(step, start versions of its groups) for each batch."""
    version = {x.group: x.version for x in starts(events)}
    return [(sum(e["ev"] == "optimizer_step" for e in events[:at]), [version[g] for g in groups])
            for at, groups in batches(events)]


def test_started_but_untrained_never_passes_u_times_depth_plus_one(tmp_path: Path) -> None:
    # default depth min(1, 4) = 1: at most 2 x 2 = 4 groups untrained, so the n-th group
    # (from 1) starts only once n <= 2 x (1 + v + 1); U = 2 workers: at most 2 running
    events = sim_run(tmp_path, "tinker")
    s = starts(events)
    assert len(s) == 16
    assert all(x.order + 1 <= U * (1 + x.version + 1) for x in s)
    assert any(x.order + 1 == U * (1 + x.version + 1) for x in s[4:])
    assert [x.version for x in s[:4]] == [0, 0, 0, 0]
    assert max(x.order - x.done_before + 1 for x in s) == U


def test_depth_zero_is_synchronous(tmp_path: Path) -> None:
    events = sim_run(tmp_path, "tinker", tinker__pipeline_depth=0)
    assert [x.version for x in starts(events)] == [v for v in range(8) for _ in range(U)]
    assert lags(events) == [0] * 8


@pytest.mark.parametrize(("bound", "depth"), [(1, 1), (2, 2), (4, 1), (4, 4)])
def test_every_group_is_trained_within_the_bound_stalest_first(tmp_path: Path, bound: int,
                                                                depth: int) -> None:
    events = sim_run(tmp_path, "tinker", tinker__max_steps_off_policy=bound,
                     tinker__pipeline_depth=depth)
    version = {x.group: x.version for x in starts(events)}
    for (step, versions), (at, groups) in zip(start_versions(events), batches(events),
                                              strict=True):
        assert all(step - v <= bound for v in versions)
        left = [version[g] for g in complete_untrained(events, at) - set(groups)]
        assert max(versions) <= min(left, default=max(versions))  # stalest first
    assert max(lags(events)) <= bound  # tokens: in-flight updates only make them fresher
    assert Tinker().staleness_bound(configure(RunConfig(system="tinker"),
                                              {"tinker.max_steps_off_policy": bound})) == bound


def test_the_deadline_makes_the_trainer_wait_for_a_straggler(tmp_path: Path) -> None:
    # bound 4: step 2 trains a group started on v0 (lag 2); bound 1 forbids that, so
    # step 1 waits for the v0 stragglers and trains only v0 groups
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    loose = start_versions(sim_run(tmp_path / "a", "tinker", tinker__max_steps_off_policy=4))
    tight = start_versions(sim_run(tmp_path / "b", "tinker", tinker__max_steps_off_policy=1))
    assert loose[1] == (1, [0, 1]) and loose[2] == (2, [0, 1])
    assert tight[1] == (1, [0, 0])
    assert all(step - v <= 1 for step, vs in tight for v in vs)


def test_nothing_is_dropped_or_aborted(tmp_path: Path) -> None:
    events = sim_run(tmp_path, "tinker", tinker__max_steps_off_policy=2,
                     tinker__pipeline_depth=2)
    trained = [g for _, groups in batches(events) for g in groups]
    assert sorted(trained) == sorted(x.group for x in starts(events)) == list(range(16))
    assert not [e for e in events if e["ev"] == "decision"]
    assert all(e["status"] == "finished" for e in events if e["ev"] == "request_finish")
    assert all(e["in_flight"] for e in events if e["ev"] == "weights_published")


def test_a_pipeline_deeper_than_the_bound_is_refused() -> None:
    with pytest.raises(ConfigError, match="tinker.pipeline_depth"):
        configure(RunConfig(system="tinker"), {"tinker.max_steps_off_policy": 1,
                                               "tinker.pipeline_depth": 2})


@pytest.mark.live
@pytest.mark.slow
def test_live_run_paces_and_trains_within_the_bound(model_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    events = live_run(model_dir, "tinker", tmp_path, tinker__max_steps_off_policy=1)
    assert events[-1]["ev"] == "run_end" and "error" not in events[-1]
    steps = [e for e in events if e["ev"] == "optimizer_step"]
    assert [e["version"] for e in steps] == [1, 2, 3, 4]
    assert all(0 < e["ess"] <= 1 for e in steps) and max(lags(events)) <= 1
    s = starts(events)
    assert len(s) == 8 and all(x.order + 1 <= U * (1 + x.version + 1) for x in s)
    assert all(step - v <= 1 for step, vs in start_versions(events) for v in vs)
