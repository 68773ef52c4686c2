"""The compiled pool's abort of some requests in flight (harness/sim/fastcore/inflight.py:
`CorePool.abort`, `abort_now`) against `EnginePool` over `SimEngine`s: the same events,
the same responses (returned by the call and delivered a turn later, the same objects),
the heap's seq counter at each moment; and a served group (`serve_group`) with some of
its samples aborted, handed back to `serve`'s own path, byte for byte in a whole run.

conftest.py keeps the rest of the suite on the Python path: these tests lift that for
themselves, and run last (COMPILED_LAST).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("numba") is None:  # looked for, not imported: see conftest
    pytest.skip("numba is not installed", allow_module_level=True)

import systems  # noqa: E402
from harness.core.config import RunConfig  # noqa: E402
from harness.core.runtime import Group, Request, Runtime  # noqa: E402
from harness.run.execute import execute  # noqa: E402
from harness.sim.co import Driver  # noqa: E402
from harness.sim.fastcore.choice import FORCE_PYTHON  # noqa: E402
from harness.sim.heap import Heap  # noqa: E402
from harness.sim.trace_buffer import BufferedTraceWriter  # noqa: E402
from systems.slime import Slime  # noqa: E402
from tests.test_core_pool import PROMPT, _pool  # noqa: E402


@pytest.fixture(autouse=True)
def core_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FORCE_PYTHON, raising=False)


def _aborts(compiled: bool, tmp_path: Path) -> tuple[list[Any], list[Any], list[Any]]:
    """test_core_pool's two replicas (3 sequences, a 100-token cache: two prompts of 40
    run at a time), ten requests (even samples on replica 0, odd on 1; targets 10, 17,
    24, then 30). At 0.13 s (mid-segment) an abort of two running requests, one on each
    replica, and of a queued one, with an id never sent and one returned; at 0.15 s
    (`abort_now`) of a queued one on replica 0 alone. Each response as it came back, with
    the heap's seq then; each call's responses, with the seq after it, and whether they
    are the very objects delivered later."""
    heap = Heap()
    writer = BufferedTraceWriter(tmp_path / f"a{compiled}.jsonl", heap.time, write=False)
    pool, driver = _pool(heap, writer, compiled), Driver(heap)
    got: list[Any] = []
    back: list[Any] = []
    log: list[Any] = []

    def answered(r: Any) -> None:
        back.append(r)
        got.append((heap.now, heap._seq, r.request.id, r.status, r.tokens,  # noqa: SLF001
                    r.version_spans, r.truncated))

    def said(out: list[Any]) -> None:
        log.append((heap.now, heap._seq,  # noqa: SLF001
                    [(r.request.id, r.status, r.tokens, r.version_spans) for r in out]))

    async def main() -> None:
        pool.submit_many([Request(0, 0, s, PROMPT, 30, priority=s % 2) for s in range(10)],
                         answered)
        await driver.sleep(0.13)
        first = await pool.abort(["0.2", "0.1", "0.7", "9.9", "0.0"])
        said(first)
        await driver.sleep(0.02)
        load = pool.load()
        log.append((load.running, load.waiting))
        second = pool.abort_now(["0.8", "0.0"])
        said(second)
        while len(got) < 10:
            await driver.sleep(0.05)
        log.append([any(r is b for b in back) for r in first + second])
        log.append(pool.preemptions)

    driver.run(main())
    return writer.events(), got, log


def _both_paths(config: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                engine_pools: list[str]) -> bytes:
    """The run on the compiled pool, then forced onto the Python one: the same bytes (the
    core's trace returned)."""
    execute(config(), tmp_path / "core.jsonl")
    monkeypatch.setenv(FORCE_PYTHON, "1")
    execute(config(), tmp_path / "python.jsonl")
    assert engine_pools == ["CorePool", "EnginePool"]
    core = (tmp_path / "core.jsonl").read_bytes()
    assert core == (tmp_path / "python.jsonl").read_bytes()
    return core


def test_an_abort_of_some_requests_in_flight_as_enginepool(tmp_path: Path) -> None:
    events, got, log = _aborts(True, tmp_path)
    assert (events, got, log) == _aborts(False, tmp_path)
    # by hand: sample 0 (10 tokens) ends at 0.105: a first step of 0.015 (its prefill of
    # 0.005) and nine of 0.01; sample 4 is admitted then, so sample 2's next step takes
    # 0.015 (to 0.12) and one more ends at 0.13: aborted there with 12 tokens
    assert got[0][2:5] == ("0.0", "finished", 10) and got[0][0] == pytest.approx(0.105)
    assert log[0][2] == [("0.2", "aborted", 12, [[0, 12]]), ("0.1", "aborted", 12, [[0, 12]]),
                         ("0.7", "aborted", 0, [])]  # replica 0's, then 1's (a queued one)
    # each returned a turn after the call, in that order; the ids not in flight ignored
    assert [g[:1] + g[2:4] for g in got[1:4]] == [(0.13, "0.2", "aborted"),
                                                 (0.13, "0.1", "aborted"),
                                                 (0.13, "0.7", "aborted")]
    assert log[1] == (4, 2)  # samples 6 and 8 (replica 0), 9 (1) wait: one more than 1's
    assert log[2][2] == [("0.8", "aborted", 0, [])]
    assert log[3] == [True] * 4  # the responses returned are those delivered
    finished = [g for g in got if g[3] == "finished"]
    assert len(finished) == 6 and {g[2] for g in finished} == {f"0.{s}" for s in
                                                                (0, 3, 4, 5, 6, 9)}


def test_the_abort_refused_before_is_made(tmp_path: Path) -> None:
    """What this change adds: the pool refused an abort of a request in flight."""
    heap = Heap()
    writer = BufferedTraceWriter(tmp_path / "r.jsonl", heap.time, write=False)
    pool = _pool(heap, writer, True)
    pool.submit_then(Request(0, 0, 0, PROMPT, 30), print)
    before = heap._seq  # noqa: SLF001
    with pytest.raises(StopIteration) as stop:
        pool.abort(["0.0", "7.0"]).send(None)
    (response,) = stop.value.value
    assert (response.status, response.tokens) == ("aborted", 0)
    assert heap._seq == before + 2  # noqa: SLF001  (its return, the replica's replan)
    assert pool.abort_now(["7.0"]) == [] and heap._seq == before + 2  # noqa: SLF001


class _AbortsSome(Slime):
    """slime whose rollout, once under way, aborts samples 0 and 2 of every other group
    (no retry, no resume: an aborted sample is checked as it is, its reward 0)."""

    async def rollout(self, rt: Runtime, groups: list[Group]) -> None:
        served = [rt.spawn(rt.serve(g)) for g in groups]
        await rt.sleep(8.0)
        await rt.engine.abort([f"{g.id}.{s}" for g in groups[::2] for s in (0, 2)])
        await rt.gather(*served)


class _AbortsSomeUnchecked(Slime):
    """`_AbortsSome` with verl's rollout: every group served unchecked (`score=False`),
    then each response checked and the groups materialised after the whole rollout."""

    async def rollout(self, rt: Runtime, groups: list[Group]) -> None:
        served = [rt.spawn(rt.serve(g, score=False)) for g in groups]
        await rt.sleep(8.0)
        await rt.engine.abort([f"{g.id}.{s}" for g in groups[::2] for s in (0, 2)])
        await rt.gather(*served)
        for group in groups:
            group.rewards = await rt.gather(*(rt.verifier.score(r) for r in group.responses))
        await rt.gather(*(rt.materialize(g) for g in groups))


@pytest.mark.parametrize("system", [_AbortsSome, _AbortsSomeUnchecked])
def test_a_served_group_aborted_in_part_is_handed_back(
        system: type, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        engine_pools: list[str]) -> None:
    """The core serves every group (`serve_group`); those with a sample aborted go back to
    `serve` (`_hand_back`): their other samples in flight there return to `_answered`.
    Served unchecked, a group handed back ends with its last return there."""
    from harness.sim.fastcore.inflight import InFlightCalls

    handed: list[int] = []
    hand_back = InFlightCalls._hand_back  # noqa: SLF001

    def counted(self: Any, gs: int) -> Any:
        handed.append(gs)
        return hand_back(self, gs)

    monkeypatch.setattr(InFlightCalls, "_hand_back", counted)
    monkeypatch.setitem(systems.SYSTEMS, "slime", system)

    def config() -> RunConfig:
        cfg = RunConfig(system="slime", workload="lsat-ar", groups=8, update_groups=2,
                        rounds=2, group_size=4, seed=5)
        cfg.sim.rollout_engines, cfg.sim.mem_fraction = 2, 0.1
        return cfg.validate()

    core = _both_paths(config, tmp_path, monkeypatch, engine_pools)
    events = [json.loads(line) for line in core.splitlines()]
    aborted = {(e["group"], e["sample"]) for e in events
               if e["ev"] == "request_finish" and e["status"] == "aborted"}
    # samples 0 and 2 of 7 groups (one had both done by then), each group handed back once
    assert len(aborted) == 14 and len(handed) == len({g for g, _ in aborted}) == 7
    # samples of those groups finished after the abort (handed back while in flight)
    cut = {e["group"]: e["t"] for e in events
           if e["ev"] == "request_finish" and e["status"] == "aborted"}
    later = [e for e in events if e["ev"] == "request_finish" and e["group"] in cut
             and e["status"] == "finished" and e["t"] > cut[e["group"]]]
    assert later


@pytest.mark.parametrize(("system", "placement", "dispatch"), [
    ("april", "colocated", "least-loaded"), ("cgp-april", "disaggregated", "round-robin"),
    ("slime-async", "disaggregated", "least-loaded")])
def test_the_systems_that_abort_in_flight_the_same_on_both_paths(
        system: str, placement: str, dispatch: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, engine_pools: list[str]) -> None:
    """Those of CORE_SYSTEMS that abort some requests in flight (their goldens: test_core_pool)
    on three replicas, a cache small enough to preempt, three rounds: APRIL's and
    cgp-april's aborts at a rollout's end, slime-async's at an update, the aborted samples
    resumed from their tokens."""
    def config() -> RunConfig:
        cfg = RunConfig(system=system, workload="lsat-ar", groups=16, update_groups=4,
                        rounds=3, group_size=4, seed=5, over_sampling_groups=24)
        s = cfg.sim
        s.rollout_engines, s.mem_fraction, s.dispatch, s.placement = 3, 0.1, dispatch, placement
        return cfg.validate()

    core = _both_paths(config, tmp_path, monkeypatch, engine_pools)
    assert core.count(b'"status":"aborted"') > 20
    assert core.count(b'"resumed_tokens":0') < core.count(b'"request_submit"')
    assert b'"request_preempt"' in core


@pytest.mark.parametrize(("placement", "dispatch", "offpolicy", "concurrent"), [
    ("disaggregated", "least-loaded", 2, 16), ("disaggregated", "round-robin", 1, 8),
    ("colocated", "least-loaded", 4, 64)])
def test_areal_s_gated_groups_the_same_on_both_paths(
        placement: str, dispatch: str, offpolicy: int, concurrent: int, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, engine_pools: list[str]) -> None:
    """AReaL's groups go through its open gate to the core whole (`serve_group`): the
    gate told of each sample sent and of each return the core takes, so that each update
    aborts what is in flight in the same order on both paths; the aborted samples handed
    back and sent again from their tokens once the gate opens. Three replicas, a cache
    small enough to preempt where disaggregated."""
    from harness.sim.fastcore.pool import CorePool

    served: list[int] = []
    serve_group = CorePool.serve_group

    def counted(self: Any, requests: list[Request], service: Any, checked: bool = True
                ) -> None:
        served.append(len(requests))
        serve_group(self, requests, service, checked)

    monkeypatch.setattr(CorePool, "serve_group", counted)

    def config() -> RunConfig:
        cfg = RunConfig(system="areal", workload="lsat-ar", groups=16, update_groups=4,
                        rounds=3, group_size=4, seed=5)
        cfg.areal.max_head_offpolicyness, cfg.areal.max_concurrent_rollouts = (
            offpolicy, concurrent)
        s = cfg.sim
        s.rollout_engines, s.mem_fraction, s.dispatch, s.placement = 3, 0.1, dispatch, placement
        return cfg.validate()

    core = _both_paths(config, tmp_path, monkeypatch, engine_pools)
    assert served and set(served) == {4}  # groups went to the core whole
    assert core.count(b'"what":"interrupt"') == 12
    if placement == "colocated":  # the GPUs are the trainer's at an update: none in flight
        assert b'"status":"aborted"' not in core and b'"request_preempt"' in core
        return
    assert core.count(b'"status":"aborted"') > 20
    assert core.count(b'"resumed_tokens":0') < core.count(b'"request_submit"')


class _SchedulesOnReturn(Slime):
    """slime whose `on_response` schedules on the heap (a sleep): what the compiled pool,
    calling it after the core's turn, cannot run in order."""

    async def rollout(self, rt: Runtime, groups: list[Group]) -> None:
        await rt.gather(*(rt.serve(g, on_response=lambda _r: rt.sleep(0.0)) for g in groups))


def test_an_on_response_that_schedules_is_refused_on_the_core(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The core tells a served group's `on_response` of each return after its turn; one
    that takes a seq (a sleep) fails the run loudly there, and runs on the Python path."""
    monkeypatch.setitem(systems.SYSTEMS, "slime", _SchedulesOnReturn)
    cfg = RunConfig(system="slime", workload="lsat-ar", groups=4, update_groups=2,
                    rounds=1, group_size=4, seed=5).validate()
    with pytest.raises(RuntimeError, match="on_response scheduled on the heap"):
        execute(cfg, tmp_path / "core.jsonl")
    monkeypatch.setenv(FORCE_PYTHON, "1")
    execute(cfg, tmp_path / "python.jsonl")
