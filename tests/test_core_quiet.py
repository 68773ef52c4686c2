"""Quiet served groups on the compiled pool (harness/sim/fastcore/groups.py, pool.py): in a
run that keeps no `request_finish` and routes by a rule (verl's static split, verl-fully-
async's round robin), a group with no gate and no `on_response` makes no HELD and no
RETURNED rows; Python builds its held responses with its K-th finish (`_fill`), or as an
abort hands it back. Checked against the Python path: the same events of the kinds kept,
and every materialised group's responses the same (tokens, status, version spans, cut).
A written run keeps every finish: its groups are quiet of their returns only (no
RETURNED row), and its trace is the Python path's byte for byte.

conftest.py keeps the rest of the suite on the Python path: these tests lift that for
themselves, and run last (COMPILED_LAST).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("numba") is None:  # looked for, not imported: see conftest
    pytest.skip("numba is not installed", allow_module_level=True)

import systems  # noqa: E402
from harness.core.config import RunConfig  # noqa: E402
from harness.core.runtime import Group, Runtime  # noqa: E402
from harness.run.execute import execute  # noqa: E402
from harness.shared.runner import RunnerBase  # noqa: E402
from harness.sim.fastcore.choice import FORCE_PYTHON  # noqa: E402
from harness.sim.runtime import SimRuntime  # noqa: E402
from systems.slime import Slime  # noqa: E402
from tests.test_core_pool_abort import (  # noqa: E402
    _AbortsSome,
    _AbortsSomeUnchecked,
    _both_paths,
)

# what a reproduction's reader of such runs keeps: no request event
KEPT = frozenset({"decision", "group_complete", "rollout_start", "rollout_complete",
                  "optimizer_step", "train_end", "weights_published"})


@pytest.fixture(autouse=True)
def core_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FORCE_PYTHON, raising=False)


def _run(cfg: RunConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
         kept: frozenset[str] = KEPT) -> tuple[list[Any], list[Any]]:
    """The run memory-only, its reader keeping `KEPT`: its events, and each materialised
    group's responses as (id, tokens, status, spans, truncated), then the heap's seq
    counter at the end (a replica cut that the other path does not make takes seqs)."""
    groups: list[Any] = []
    with monkeypatch.context() as patch:
        materialized, loop_run = RunnerBase.materialized, SimRuntime._loop_run  # noqa: SLF001

        def ran(self: Any, coro: Any) -> None:
            loop_run(self, coro)
            groups.append(self.heap._seq)  # noqa: SLF001

        patch.setattr(SimRuntime, "_loop_run", ran)

        def seen(self: Any, group: Any) -> Any:
            groups.append([(r.request.id, r.tokens, r.status, r.version_spans, r.truncated)
                           for r in group.responses])
            return materialized(self, group)

        patch.setattr(RunnerBase, "materialized", seen)

        def reader(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return list(events)

        reader.kinds = kept  # type: ignore[attr-defined]
        events = execute(cfg, tmp_path / "run.jsonl", reader, write=False)
    return events, groups


def _both(config: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
          engine_pools: list[str], kept: frozenset[str] = KEPT
          ) -> tuple[dict[str, int], list[Any], list[Any]]:
    """The run on the core (counting its quiet groups, the rows Python was handed, the
    fills and hand-backs) and on the Python path: the same events and responses."""
    from harness.sim.fastcore.groups import HELD, QUIET_SILENT, RETURNED, GroupEngines
    from harness.sim.fastcore.inflight import InFlightCalls
    from harness.sim.fastcore.pool import CorePool
    from harness.sim.fastcore.timeline import G_NE

    seen = {"quiet": 0, "loud": 0, "silent": 0, "rows": 0, "fill": 0, "hand_back": 0}
    group, forward = GroupEngines.group, CorePool._forward  # noqa: SLF001
    fill, hand_back = CorePool._fill, InFlightCalls._hand_back  # noqa: SLF001

    def grouped(self: Any, latencies: list[float], quiet: int = 0) -> int:
        seen["quiet" if quiet else "loud"] += 1
        seen["silent"] += quiet == QUIET_SILENT
        return group(self, latencies, quiet)

    def forwarded(self: Any) -> None:
        core = self._core  # noqa: SLF001
        kinds = core.ev[:int(core.g[G_NE]), 0]
        seen["rows"] += int(((kinds == HELD) | (kinds == RETURNED)).sum())
        forward(self)

    def counted(name: str, call: Any) -> Any:
        def inner(self: Any, gs: int, *args: Any) -> Any:
            seen[name] += 1
            return call(self, gs, *args)
        return inner

    monkeypatch.setattr(GroupEngines, "group", grouped)
    monkeypatch.setattr(CorePool, "_forward", forwarded)
    monkeypatch.setattr(CorePool, "_fill", counted("fill", fill))
    monkeypatch.setattr(InFlightCalls, "_hand_back", counted("hand_back", hand_back))
    core = _run(config(), tmp_path, monkeypatch, kept)
    monkeypatch.setenv(FORCE_PYTHON, "1")
    python = _run(config(), tmp_path, monkeypatch, kept)
    assert engine_pools == ["CorePool", "EnginePool"]
    assert core == python
    return seen, core[0], core[1][:-1]


@pytest.mark.parametrize("silent", [False, True])
@pytest.mark.parametrize(("partial", "staleness"), [(True, 1.0), (False, 2.0)])
def test_verl_fully_async_s_quiet_groups_as_on_python(
        partial: bool, staleness: float, silent: bool, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, engine_pools: list[str]) -> None:
    """Stale groups in flight at every sync, aborted there and (partial rollout) sent on
    across the install; a cache small enough to preempt. Every group quiet, no HELD or
    RETURNED row handed to Python, the aborted ones handed back."""
    def config() -> RunConfig:
        cfg = RunConfig(system="verl-fully-async", workload="lsat-ar", groups=16,
                        update_groups=2, rounds=3, group_size=4, seed=5)
        cfg.sim.rollout_engines, cfg.sim.mem_fraction = 3, 0.1
        v = cfg.verl_async
        v.staleness_threshold, v.partial_rollout = staleness, partial
        v.trigger_parameter_sync_step, v.require_batches = 1, 2
        return cfg.validate()

    kept = KEPT - {"group_complete"} if silent else KEPT
    seen, events, groups = _both(config, tmp_path, monkeypatch, engine_pools, kept)
    assert seen["quiet"] == 48 and seen["loud"] == 0 and seen["rows"] == 0
    assert seen["silent"] == (48 if silent else 0)
    assert seen["fill"] > 20 and seen["hand_back"] > 10
    syncs = [e["aborted"] for e in events if e.get("what") == "param_sync"]
    assert len(syncs) == 12 and sum(syncs) > 0  # 48 groups, 4 a trainer fit, a sync each
    spans = {len(r[3]) for g in groups for r in g}  # several versions only going on
    assert (max(spans) > 1) == partial
    assert any(r[2] == "aborted" for g in groups for r in g) != partial


@pytest.mark.parametrize("dispatch", ["least-loaded", "static"])
def test_verl_s_unchecked_groups_quiet_by_its_static_split(
        dispatch: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        engine_pools: list[str]) -> None:
    """verl's groups, served unchecked: quiet under its static split; routed by load, a
    return routes what follows, so each is told (no group quiet)."""
    def config() -> RunConfig:
        cfg = RunConfig(system="verl", workload="lsat-ar", groups=8, update_groups=2,
                        rounds=2, group_size=4, seed=5)
        cfg.sim.rollout_engines, cfg.sim.mem_fraction, cfg.sim.dispatch = 2, 0.1, dispatch
        return cfg.validate()

    seen, _, groups = _both(config, tmp_path, monkeypatch, engine_pools)
    assert len(groups) == 16
    if dispatch == "static":
        assert seen["quiet"] == 16 and seen["rows"] == 0 and seen["fill"] == 16
    else:
        assert seen["loud"] == 16 and seen["quiet"] == 0 and seen["rows"] > 0


@pytest.mark.parametrize("system", [_AbortsSome, _AbortsSomeUnchecked])
def test_an_abort_by_id_of_quiet_groups_as_on_python(
        system: type, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        engine_pools: list[str]) -> None:
    """Samples 0 and 2 of every other group aborted by id mid-rollout, routed round robin:
    a sample whose return the core took quietly is no longer cut (`_routed`), the groups
    hit are handed back with their held responses built then."""
    monkeypatch.setitem(systems.SYSTEMS, "slime", system)

    def config() -> RunConfig:
        cfg = RunConfig(system="slime", workload="lsat-ar", groups=8, update_groups=2,
                        rounds=2, group_size=4, seed=5)
        cfg.sim.rollout_engines, cfg.sim.mem_fraction = 2, 0.1
        cfg.sim.dispatch = "round-robin"
        return cfg.validate()

    seen, _, groups = _both(config, tmp_path, monkeypatch, engine_pools)
    assert seen["quiet"] == 16 and seen["rows"] == 0 and seen["hand_back"] >= 6
    assert sum(r[2] == "aborted" for g in groups for r in g) >= 12


class _PublishesWhileChecking(Slime):
    """slime whose rollout, once every sample has finished (its checks still running: rp-
    code's take seconds), takes an optimizer step and installs its weights, nothing in
    flight: the groups' responses were made at the version before."""

    async def rollout(self, rt: Runtime, groups: list[Group]) -> None:
        served = [rt.spawn(rt.serve(g)) for g in groups]
        while (load := rt.engine.load()).running + load.waiting:
            await rt.sleep(0.05)
        await rt.trainer.step()
        await rt.trainer.publish()
        await rt.gather(*served)


def test_a_silent_group_s_responses_keep_the_version_they_were_made_at(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine_pools: list[str]) -> None:
    """A run that keeps no `group_complete`: each group's K-th return is the core's too
    (QUIET_SILENT) and its responses are built at its last check. An install between its
    last finish and that check, with nothing in flight, moves the pool's version but no
    call's epoch: the responses are read from the core, and carry the version they were
    made at, as on the Python path."""
    monkeypatch.setitem(systems.SYSTEMS, "slime", _PublishesWhileChecking)

    def config() -> RunConfig:
        cfg = RunConfig(system="slime", workload="rp-code", groups=4, update_groups=2,
                        rounds=2, group_size=4, seed=5)
        cfg.sim.rollout_engines, cfg.sim.dispatch = 2, "round-robin"
        cfg.sim.weight_sync_s = 0.01
        return cfg.validate()

    seen, events, groups = _both(config, tmp_path, monkeypatch, engine_pools,
                                 KEPT - {"group_complete"})
    assert seen["silent"] == 8 and seen["fill"] == 8
    published = [e for e in events if e["ev"] == "weights_published"]
    assert len(published) == 4  # the rollout's own, then slime's, each round
    versions = [{span[0] for r in g for span in r[3]} for g in groups]
    # made before each round's first install: 0, then 3 (this step, slime's two of round 0)
    assert versions == [{0}] * 4 + [{3}] * 4


class _Service:
    """What the pool reads of a served group's service (`GroupService`'s): no gate, no
    `on_response`, its responses, `answered_last` at the K-th return."""

    gate = on_response = None

    def __init__(self, k: int) -> None:
        self.responses: list[Any] = [None] * k
        self.last: Any = None

    def answered_last(self, response: Any) -> None:
        self.responses[response.request.sample] = response
        self.last = response


def test_a_quiet_return_is_not_cut_by_an_abort_of_its_id(tmp_path: Path) -> None:
    """test_core_pool's two replicas, one group of four served unchecked, round robin
    (samples 0 and 2 on replica 0; 10, 17, 24 and 30 tokens): sample 0 ends at 0.105 s
    (a prefill step of 0.015, nine of 0.01) and its return is the core's, told to no one.
    An abort of its id at 0.13 s finds nothing in flight, as `EnginePool`'s would (its
    request returned): no replica cut, no seq taken. The K-th return builds the others."""
    from harness.core.runtime import Request
    from harness.sim.co import Driver
    from harness.sim.dispatch import RoundRobin
    from harness.sim.fastcore.groups import RETURNED_QUIET
    from harness.sim.fastcore.pool import CorePool
    from harness.sim.heap import Heap
    from harness.sim.trace_buffer import BufferedTraceWriter
    from tests.test_core_pool import PROMPT, STEP, _target

    heap = Heap()
    writer = BufferedTraceWriter(tmp_path / "q.jsonl", heap.time, write=False,
                                 keep={"request_submit"})
    pool = CorePool(heap, STEP, 100, 3, 2, 2, 1, writer, 4096, RoundRobin, _target, room=1)
    driver, service = Driver(heap), _Service(4)
    log: list[Any] = []

    async def main() -> None:
        pool.serve_group([Request(0, 0, s, PROMPT, 30) for s in range(4)], service, False)
        await driver.sleep(0.13)
        core = pool._core  # noqa: SLF001
        log.append((core.back[:4].tolist(), core.counts[0].tolist()))
        before = heap._seq  # noqa: SLF001
        log.append((pool.abort_now(["0.0"]), heap._seq - before))  # noqa: SLF001
        while service.last is None:
            await driver.sleep(0.05)

    driver.run(main())
    assert log[0] == ([RETURNED_QUIET, 0, 0, 0], [4, 3, 4, 0, 1])  # (unscored, unreturned)
    assert log[1] == ([], 0)
    assert [(r.tokens, r.status, r.version_spans) for r in service.responses] == [
        (10, "finished", [[0, 10]]), (17, "finished", [[0, 17]]),
        (24, "finished", [[0, 24]]), (30, "finished", [[0, 30]])]
    assert pool._live == [None] * 4  # noqa: SLF001  (let go of as the group ended)


@pytest.mark.parametrize("dispatch", ["round-robin", "least-loaded"])
def test_a_written_run_s_groups_are_quiet_of_their_returns_only(
        dispatch: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        engine_pools: list[str]) -> None:
    """A written trace keeps every finish: routed by a rule, each group makes its HELD
    rows (their responses and `request_finish` events) but no RETURNED row, and the trace
    is the Python path's byte for byte, syncs aborting and resuming groups in flight;
    routed by load, every return is told."""
    from harness.sim.fastcore.groups import HELD, QUIET_RETURNS, RETURNED, GroupEngines
    from harness.sim.fastcore.pool import CorePool
    from harness.sim.fastcore.timeline import G_NE

    def config() -> RunConfig:
        cfg = RunConfig(system="verl-fully-async", workload="lsat-ar", groups=16,
                        update_groups=2, rounds=3, group_size=4, seed=5)
        cfg.sim.rollout_engines, cfg.sim.mem_fraction, cfg.sim.dispatch = 3, 0.1, dispatch
        v = cfg.verl_async
        v.staleness_threshold, v.partial_rollout = 1.0, True
        v.trigger_parameter_sync_step, v.require_batches = 1, 2
        return cfg.validate()

    quiet: list[int] = []
    rows = {HELD: 0, RETURNED: 0}
    group, forward = GroupEngines.group, CorePool._forward  # noqa: SLF001

    def grouped(self: Any, latencies: list[float], how: int = 0) -> int:
        quiet.append(how)
        return group(self, latencies, how)

    def forwarded(self: Any) -> None:
        kinds = self._core.ev[:int(self._core.g[G_NE]), 0].tolist()  # noqa: SLF001
        rows[HELD] += kinds.count(HELD)
        rows[RETURNED] += kinds.count(RETURNED)
        forward(self)

    monkeypatch.setattr(GroupEngines, "group", grouped)
    monkeypatch.setattr(CorePool, "_forward", forwarded)
    trace = _both_paths(config, tmp_path, monkeypatch, engine_pools)  # the same bytes
    assert b'"status":"aborted"' in trace and len(quiet) == 48
    assert rows[HELD] > 100
    if dispatch == "round-robin":
        assert set(quiet) == {QUIET_RETURNS} and rows[RETURNED] == 0
    else:
        assert set(quiet) == {0} and rows[RETURNED] > 100
