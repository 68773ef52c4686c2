"""The simulated runtime's handling of failures and of a run's defaults."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from harness.config import RunConfig
from harness.sim.runtime import SimRuntime
from harness.trace import read_trace


class _Failing:
    name = "failing"

    async def run(self, rt) -> None:  # type: ignore[no-untyped-def]
        async def boom() -> None:
            await asyncio.sleep(1.0)
            raise RuntimeError("worker broke")

        rt.spawn(boom())
        await asyncio.Event().wait()  # would wait forever without the failure


def test_a_failed_task_fails_the_run_and_is_recorded(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    with pytest.raises(RuntimeError, match="worker broke"):
        SimRuntime(RunConfig(workload="sci-jl").validate(), path).run(_Failing())
    last = read_trace(path)[-1]
    assert last["ev"] == "run_end" and "worker broke" in last["error"]
    assert last["t"] == 1.0


def test_response_cap_defaults_to_the_profile(tmp_path: Path) -> None:
    cfg = RunConfig(workload="orz-math").validate()
    SimRuntime(cfg, tmp_path / "t.jsonl")
    assert cfg.max_response_tokens == 32768
