"""Features of real runs the same bytes on the compiled pool and on the Python path: a
verifier worker pool, several replicas behind each router with a cache small enough to
preempt, and verl-fully-async's syncs with stale groups in flight (aborts, partial
rollouts across installs). test_core_pool.py holds the goldens and the scripted pool.

conftest.py keeps the rest of the suite on the Python path (numba breaks vLLM's
in-process start): these tests lift that for themselves, and run last.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("numba") is None:  # looked for, not imported: see conftest
    pytest.skip("numba is not installed", allow_module_level=True)

from harness.core.config import RunConfig  # noqa: E402
from harness.run.execute import execute  # noqa: E402
from harness.sim.fastcore.choice import FORCE_PYTHON  # noqa: E402
from tests.test_golden import golden_config  # noqa: E402


@pytest.fixture(autouse=True)
def core_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FORCE_PYTHON, raising=False)


@pytest.mark.parametrize(("system", "workers"), [
    ("slime", 1), ("verl", 3), ("verl-fully-async", 1), ("april", 1), ("areal", 3)])
def test_reward_workers_the_same_on_both_paths(
        system: str, workers: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        engine_pools: list[str]) -> None:
    """A verifier worker pool keeps the checks in Python (`_Queued`): each group goes to
    the core with one `submit_many`, its returns Python's; the same bytes as `EnginePool`,
    and other bytes than with no pool (the workers are waited for)."""
    def config(n: int) -> RunConfig:
        cfg = golden_config(system)
        cfg.sim.verifier_workers = n
        return cfg

    pools = engine_pools
    execute(config(workers), tmp_path / "core.jsonl")
    execute(config(0), tmp_path / "unbounded.jsonl")
    monkeypatch.setenv(FORCE_PYTHON, "1")
    execute(config(workers), tmp_path / "python.jsonl")
    assert pools == ["CorePool", "CorePool", "EnginePool"]
    core = (tmp_path / "core.jsonl").read_bytes()
    assert core == (tmp_path / "python.jsonl").read_bytes()
    assert core != (tmp_path / "unbounded.jsonl").read_bytes()


@pytest.mark.parametrize(("system", "dispatch"), [
    ("slime", "least-loaded"), ("cgp", "round-robin"), ("verl", "static"),
    ("cgp-fgd", "least-loaded"), ("verl-one-step-off", "round-robin")])
def test_replicas_routers_and_preemptions_the_same_on_both_paths(
        system: str, dispatch: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three replicas behind each router, a cache small enough to preempt, two rounds
    (an install between them), priorities (cgp-fgd's priority reading), a .zst trace."""
    def config() -> RunConfig:
        cfg = RunConfig(system=system, workload="lsat-ar", groups=12, update_groups=2,
                        rounds=2, group_size=4, seed=5)
        cfg.sim.rollout_engines, cfg.sim.mem_fraction, cfg.sim.dispatch = 3, 0.1, dispatch
        if system == "cgp-fgd":
            cfg.frontier_mode = "priority"
        return cfg.validate()

    execute(config(), tmp_path / "core.jsonl.zst")
    monkeypatch.setenv(FORCE_PYTHON, "1")
    execute(config(), tmp_path / "python.jsonl.zst")
    core = (tmp_path / "core.jsonl.zst").read_bytes()
    assert core == (tmp_path / "python.jsonl.zst").read_bytes()
    import zstandard

    lines = zstandard.ZstdDecompressor().decompressobj().decompress(core).splitlines()
    assert sum(b'"request_preempt"' in line for line in lines) > 0
    assert {b'"engine":%d' % e in b"".join(lines) for e in range(3)} == {True}


def _counting(seen: dict[str, int], name: str, call: Any) -> Any:
    def counted(*args: Any, **kwargs: Any) -> Any:
        seen[name] += 1
        return call(*args, **kwargs)
    return counted


@pytest.mark.parametrize(("partial", "staleness", "mem", "dispatch"), [
    (True, 1.0, 0.1, "least-loaded"), (False, 1.0, 0.1, "least-loaded"),
    (True, 2.0, 0.05, "round-robin")])
def test_verl_fully_async_s_syncs_in_flight_the_same_on_both_paths(
        partial: bool, staleness: float, mem: float, dispatch: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, engine_pools: list[str]) -> None:
    """Stale groups in flight at every sync (a sync a trainer step): each sync aborts
    them, partial rollout sends them on with their tokens across the install (spans of
    several versions) or ends them there; a cache small enough to preempt. The core
    serves every group (`serve_group`, `on_response` told at each return) and hands those
    with an aborted sample back to `serve`."""
    def config() -> RunConfig:
        cfg = RunConfig(system="verl-fully-async", workload="lsat-ar", groups=16,
                        update_groups=2, rounds=3, group_size=4, seed=5)
        cfg.sim.rollout_engines, cfg.sim.mem_fraction, cfg.sim.dispatch = 3, mem, dispatch
        v = cfg.verl_async
        v.staleness_threshold, v.partial_rollout = staleness, partial
        v.trigger_parameter_sync_step, v.require_batches = 1, 2
        return cfg.validate()

    pools = engine_pools
    from harness.sim.fastcore.inflight import InFlightCalls
    from harness.sim.fastcore.pool import CorePool

    seen = {"serve_group": 0, "_hand_back": 0}  # the core serves the groups, hands some back
    for owner, name in ((CorePool, "serve_group"), (InFlightCalls, "_hand_back")):
        monkeypatch.setattr(owner, name, _counting(seen, name, getattr(owner, name)))
    execute(config(), tmp_path / "core.jsonl")
    monkeypatch.setenv(FORCE_PYTHON, "1")
    execute(config(), tmp_path / "python.jsonl")
    assert pools == ["CorePool", "EnginePool"]
    assert seen["serve_group"] == 48 and seen["_hand_back"] > 10  # 16 groups x 3 rounds
    core = (tmp_path / "core.jsonl").read_bytes()
    assert core == (tmp_path / "python.jsonl").read_bytes()
    assert core.count(b'"status":"aborted"') > 30
    assert (core.count(b'"resumed_tokens":0') < core.count(b'"request_submit"')) == partial
    several = re.search(rb'"version_spans":\[\[\d+,\d+\],\[', core)  # two versions
    assert (several is not None) == partial
