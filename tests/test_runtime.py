"""The simulated runtime's handling of failures and of a run's defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.config import RunConfig
from harness.core.trace import read_trace
from harness.sim.runtime import SimRuntime


class _Failing:
    name = "failing"

    async def run(self, rt) -> None:  # type: ignore[no-untyped-def]
        async def boom() -> None:
            await rt.sleep(1.0)
            raise RuntimeError("worker broke")

        rt.spawn(boom())
        await rt.event().wait()  # would wait forever without the failure


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


class _Resizer:
    """Submits 16 requests on 4 replicas, then keeps only 2 of them."""

    name = "resizer"

    async def run(self, rt) -> None:  # type: ignore[no-untyped-def]
        from harness.core.runtime import Request

        prompts = rt.workload.take(16)
        futures = [rt.engine.submit(Request(0, rt.new_group_id(), 0, p, 8192)) for p in prompts]
        await rt.sleep(5.0)
        self.released = await rt.engine.resize(2)
        self.responses = [await f for f in futures]
        await rt.engine.reconfigure(2)
        self.after = rt.engine.load()


def test_resize_moves_requests_without_losing_tokens(tmp_path: Path) -> None:
    cfg = RunConfig(workload="sci-jl").validate()
    cfg.sim.rollout_engines, cfg.sim.rollout_tp = 4, 1
    system = _Resizer()
    path = tmp_path / "t.jsonl"
    SimRuntime(cfg, path).run(system)
    events = read_trace(path)
    assert system.released == 2  # two TP=1 replicas handed back
    assert all(r.status == "finished" for r in system.responses)
    want = [min(r.request.prompt.hidden.lengths[0], 8192) for r in system.responses]
    assert [r.tokens for r in system.responses] == want  # nothing lost in the move
    moved = [e for e in events if e["ev"] == "request_submit" and e["resumed_tokens"] > 0]
    assert moved and all(e["engine"] < 2 for e in moved)  # resumed on the kept replicas
    late = [e for e in events if e["ev"] == "request_admit" and e["t"] > 5.0]
    assert all(e["engine"] < 2 for e in late)
    (reconf,) = [e for e in events if e["ev"] == "engine_reconfigure"]
    assert (reconf["tp"], reconf["replicas"]) == (2, 2)
    assert system.after.tp == 2
