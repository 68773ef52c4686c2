"""Fixtures shared by the test files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from harness.core.config import RunConfig
from harness.run.execute import execute

# A developer's own presets file (harness.sim.presets) must not change what the tests see;
# the tests that read one name it themselves.
os.environ["ROLLOUTBENCH_PRESETS"] = str(Path(__file__).parent / "no-user-presets.toml")


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny live model, built once per test session (needs the live extras)."""
    pytest.importorskip("transformers")
    from harness.live.model import init_model

    return Path(init_model(tmp_path_factory.mktemp("live") / "model"))


# Three small runs the analysis and compare tests read.
def run(system: str, path: Path, groups: int = 8, group_size: int = 4, rounds: int = 2,
        **sim: Any) -> Path:
    cfg = RunConfig(system=system, workload="lsat-ar", groups=groups, update_groups=2,
                    rounds=rounds, group_size=group_size, seed=3)
    for key, value in sim.items():
        setattr(cfg.sim, key, value)
    execute(cfg.validate(), path)
    return path


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("traces")
    return {
        "slime": run("slime", d / "slime.jsonl"),
        "fgd": run("cgp-fgd", d / "fgd.jsonl"),
        # two replicas and a small KV cache: requests are preempted and readmitted
        "preempt": run("slime", d / "preempt.jsonl", groups=16, group_size=8, rounds=1,
                       rollout_engines=2, mem_fraction=0.2),
    }
