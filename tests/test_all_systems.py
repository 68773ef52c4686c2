"""Properties every system must keep, and the lag structure of the synchronous ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.config import RunConfig
from harness.core.trace import read_trace
from harness.run.execute import execute
from systems import system_names


def small(system: str, seed: int = 3) -> RunConfig:
    cfg = RunConfig(system=system, workload="sci-jl", groups=8, update_groups=2, rounds=2,
                    seed=seed, over_sampling_groups=12, concurrency=32)
    if system in ("april", "rollpacker", "verl"):
        cfg.update_groups = 8
    return cfg.validate()


@pytest.mark.parametrize("system", system_names())
def test_same_config_and_seed_give_the_same_trace(system: str, tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    execute(small(system), a)
    execute(small(system), b)
    execute(small(system, seed=4), c)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


@pytest.mark.parametrize("system", ["slime", "cgp", "cgp-fgd"])
def test_synchronous_lag_runs_from_zero_to_r_over_u_minus_one(system: str,
                                                              tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    execute(small(system), path)
    steps = [e for e in read_trace(path) if e["ev"] == "optimizer_step"]
    per_round = 8 // 2
    for rnd in range(2):
        lags = [e["lag_max"] for e in steps[rnd * per_round:(rnd + 1) * per_round]]
        assert lags == list(range(per_round))  # step j of a round trains on version-j data
        assert all(e["lag_min"] == e["lag_max"] for e in steps)  # one version per round
