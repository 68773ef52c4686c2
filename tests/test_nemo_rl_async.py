"""nemo-rl-async: NeMo-RL's target-step rule, read back from its traces.

Small config: 8 groups of 8 a round, N = U = 2 groups a step, 3 rounds = 12
steps. A group generated from version g serves a target step w with
g + 1 <= w <= g + A (and 0 <= w <= A from the first version), so every token is
trained at most A steps after the version that generated it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from async_trace import dropped, run, token_lags

from harness.core.config import ConfigError, RunConfig
from systems import get_system


def start_versions_by_step(events: list[dict]) -> list[list[int]]:
    """For each step, the engine's version when each of its groups started."""
    version, start = 0, {}
    for e in events:
        if e["ev"] == "weights_published":
            version = e["version"]
        elif e["ev"] == "request_submit":
            start.setdefault(e["group"], version)
    return [[start[g] for g in e["groups"]] for e in events if e["ev"] == "batch_dispatch"]


@pytest.mark.parametrize("age", [1, 2, 4])
@pytest.mark.parametrize("in_flight", [False, True])
def test_every_group_serves_a_target_within_the_age(tmp_path: Path, age: int,
                                                    in_flight: bool) -> None:
    events = run("nemo-rl-async", tmp_path, nemo_rl__max_trajectory_age_steps=age,
                 nemo_rl__in_flight_weight_updates=in_flight)
    by_step = start_versions_by_step(events)
    assert len(by_step) == 12 and all(len(gs) == 2 for gs in by_step)
    for w, versions in enumerate(by_step):
        assert all((g == 0 and w <= age) or g + 1 <= w <= g + age for g in versions)
    lags = token_lags(events)
    cfg = RunConfig(system="nemo-rl-async")
    cfg.nemo_rl.max_trajectory_age_steps = age
    assert max(lags) == age == get_system("nemo-rl-async").staleness_bound(cfg)  # reached
    assert dropped(events) == []


def test_without_in_flight_updates_generation_drains_first(tmp_path: Path) -> None:
    drained = run("nemo-rl-async", tmp_path)
    spans = [e["version_spans"] for e in drained if e["ev"] == "request_finish"]
    assert all(len(s) == 1 for s in spans)  # no response crosses an update
    assert not any(e["in_flight"] for e in drained if e["ev"] == "weights_published")
    (tmp_path / "b").mkdir()
    flowing = run("nemo-rl-async", tmp_path / "b", nemo_rl__in_flight_weight_updates=True)
    assert any(len(e["version_spans"]) > 1 for e in flowing if e["ev"] == "request_finish")
    assert flowing[-1]["t"] < drained[-1]["t"]  # measured 418.9 s against 465.9 s


def test_in_flight_it_is_pipelinerls_admission_with_max_lag_a(tmp_path: Path) -> None:
    nemo = run("nemo-rl-async", tmp_path, nemo_rl__max_trajectory_age_steps=2,
               nemo_rl__in_flight_weight_updates=True)
    pipe = run("pipelinerl", tmp_path, max_lag=2)
    assert token_lags(nemo) == token_lags(pipe)


def test_recompute_after_updates_reaches_the_engine(tmp_path: Path) -> None:
    events = run("nemo-rl-async", tmp_path, nemo_rl__in_flight_weight_updates=True,
                 nemo_rl__recompute_kv_cache_after_weight_updates=True)
    assert all(e["recompute"] for e in events if e["ev"] == "weights_published")
    assert any(e.get("reason") == "recompute" for e in events if e["ev"] == "request_preempt")


def test_an_age_below_one_is_refused() -> None:
    cfg = RunConfig(system="nemo-rl-async")
    cfg.nemo_rl.max_trajectory_age_steps = 0
    with pytest.raises(ConfigError, match="nemo_rl.max_trajectory_age_steps"):
        cfg.validate()
