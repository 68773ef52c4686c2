"""laminar (systems/laminar.py): its relay pulls and its repack worked out by hand on a
scripted runtime of two engine replicas, its admission rule by hand, and its knobs.

The scripted runtime is the contract and nothing more, on an asyncio loop whose clock
jumps to the next timer (tests/clocks.py): every sequence makes one token a second however
many run, a training step takes 1 s, a replica's pull of newer weights from the relay
takes 1 s (that replica only), scoring, materialising and publishing take none."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from harness.core.config import ConfigError, RunConfig
from harness.core.metrics import finished_rounds
from harness.core.runtime import Group, Prompt, Request, Response
from harness.core.trace import read_trace
from harness.run.execute import execute
from harness.studies.plan.knobs import ASYNC_STALENESS
from systems.common import admission_room
from systems.laminar import Laminar
from tests.clocks import VirtualAsyncio
from tests.scripted import ScriptedRuntimeBase


class ScriptedEngine:
    def __init__(self, rt: ScriptedRuntime, lengths: dict[tuple[int, int], int]) -> None:
        self.rt, self.lengths, self.replicas = rt, lengths, 2
        self.versions = [0, 0]  # each replica's weights
        self.live: dict[str, tuple[Request, float, int, asyncio.Future[Response], Any]] = {}

    @property
    def version(self) -> int:
        return min(self.versions)

    def _response(self, request: Request, made: int, version: int, status: str) -> Response:
        before = request.resume.version_spans if request.resume else []
        spans = [*before, [version, made]] if made else list(before)
        done = (request.resume.tokens if request.resume else 0) + made
        return Response(request, done, spans, status)  # type: ignore[arg-type]

    def submit(self, request: Request) -> asyncio.Future[Response]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Response] = loop.create_future()
        done = request.resume.tokens if request.resume else 0
        left = self.lengths[(request.group, request.sample)] - done
        version = self.versions[request.replica]
        self.rt.log("submit", group=request.group, sample=request.sample, resumed=done,
                    replica=request.replica)

        def finish() -> None:
            self.live.pop(request.id)
            future.set_result(self._response(request, left, version, "finished"))

        self.live[request.id] = (request, loop.time(), version, future,
                                 loop.call_later(left, finish))
        return future

    async def abort(self, ids: Any) -> list[Response]:
        out = []
        for rid in list(ids):
            if rid not in self.live:
                continue
            request, began, version, future, timer = self.live.pop(rid)
            timer.cancel()
            made = round(self.rt.now() - began)
            future.set_result(response := self._response(request, made, version, "aborted"))
            out.append(response)
        return out

    async def pull(self, replica: int) -> int:
        relay = self.rt.relay
        if relay > self.versions[replica]:
            self.rt.log("pull", replica=replica, version=relay)
            await asyncio.sleep(1.0)
            self.versions[replica] = relay
        return self.versions[replica]


class ScriptedTrainer:
    def __init__(self, rt: ScriptedRuntime) -> None:
        self.rt, self.version, self.gpus = rt, 0, 1

    async def train(self, batch: int, groups: Any, gpus: int | None = None) -> None:
        await asyncio.sleep(1.0)

    async def step(self) -> int:
        self.version += 1
        return self.version

    async def publish(self, in_flight: bool = False, recompute: bool = False,
                      relay: bool = False) -> None:
        assert relay, "laminar publishes to the relay only"
        self.rt.relay = self.version


class ScriptedRuntime(ScriptedRuntimeBase):
    def __init__(self, cfg: RunConfig, lengths: dict[tuple[int, int], int]) -> None:
        super().__init__(cfg)
        self.relay = 0
        self.engine = ScriptedEngine(self, lengths)
        self.trainer = ScriptedTrainer(self)
        self.responses: dict[tuple[int, int], Response] = {}

    async def materialize(self, group: Group) -> None:
        for r in group.responses:
            self.responses[(group.id, r.request.sample)] = r


def run(lengths: dict[tuple[int, int], int], groups: int, **knobs: Any) -> ScriptedRuntime:
    cfg = RunConfig(system="laminar", groups=groups, update_groups=1, group_size=2, rounds=1)
    for name, value in knobs.items():
        setattr(cfg.laminar, name, value)
    rt = ScriptedRuntime(cfg, lengths)
    loop = VirtualAsyncio()
    try:
        loop.run_until_complete(Laminar().run(rt))  # type: ignore[arg-type]
    finally:
        loop.close()
    return rt


def dispatches(rt: ScriptedRuntime) -> list[tuple[float, list[int]]]:
    return [(t, f["groups"]) for t, ev, f in rt.events if ev == "batch_dispatch"]


def decisions(rt: ScriptedRuntime, what: str) -> list[tuple[float, dict[str, Any]]]:
    return [(t, {k: v for k, v in f.items() if k != "what"}) for t, ev, f in rt.events
            if ev == "decision" and f["what"] == what]


# g0 on replica 0 ends at 3 s, g1 on replica 1 at 10 s
PULLS = {(0, 0): 2, (0, 1): 3, (1, 0): 10, (1, 1): 10, (2, 0): 4, (2, 1): 4,
         (3, 0): 1, (3, 1): 1}


def test_each_replica_pulls_at_its_own_batch_end_worked_by_hand() -> None:
    """One group a batch, no repack, U = 1, four groups. At 0 s replica 0 takes g0 and
    replica 1 g1, both at v0. g0 ends at 3 s and trains 3-4 s (v1 to the relay at 4 s).
    Replica 0's batch ended at 3 s, before v1 reached the relay: it takes g2 at v0 at
    once; g2 ends at 7 s and trains 7-8 s. At 7 s replica 0 pulls v1 (7-8 s) and takes
    g3 at v1 at 8 s; g3 ends at 9 s and trains 9-10 s. Replica 1 is never paused: g1
    runs 0-10 s under v0 alone and trains 10-11 s, three steps after its version."""
    rt = run(PULLS, groups=4, batch_groups=1, repack_fraction=0.0)
    assert dispatches(rt) == [(3.0, [0]), (7.0, [2]), (9.0, [3]), (10.0, [1])]
    assert [(t, f) for t, ev, f in rt.events if ev == "pull"] == [
        (7.0, {"replica": 0, "version": 1})]
    assert [(t, f["replica"], f["version"]) for t, f in decisions(rt, "rollout_batch")] == [
        (0.0, 0, 0), (0.0, 1, 0), (3.0, 0, 0), (8.0, 0, 1)]
    assert rt.responses[(1, 0)].version_spans == [[0, 10]]
    assert rt.responses[(3, 1)].version_spans == [[1, 1]]


# replica 0: g0 (1, 2) and g1 (3, 20); replica 1: g2 (4, 5) and g3 (6, 25)
REPACK = {(0, 0): 1, (0, 1): 2, (1, 0): 3, (1, 1): 20, (2, 0): 4, (2, 1): 5,
          (3, 0): 6, (3, 1): 25, (4, 0): 1, (4, 1): 1, (5, 0): 2, (5, 1): 2}


def test_a_tail_is_repacked_and_the_freed_replica_takes_new_prompts_worked_by_hand() -> None:
    """Two groups (4 requests) a batch, repack at <= 2 requests left, U = 1, six groups.
    At 0 s replica 0 takes g0, g1 and replica 1 g2, g3 (v0). g0 ends at 2 s, trains 2-3
    s (v1 on the relay at 3 s). Replica 0 is down to 2 requests at 2 s and 1 at 3 s, but
    replica 1 holds 4 of its 4 then: no room. At 5 s g2 ends (trains 5-6 s) and replica
    1 is down to 2 (g3's two samples, 5 tokens each): replica 0 has the same version and
    1 + 2 <= 4, so they are aborted and sent on there with their 5 tokens. Replica 1
    pulls v1 (5-6 s) and takes g4 and g5 at 6 s: g4 ends at 7 s (trains 7-8 s), g5 at
    8 s (8-9 s). On replica 0, g3's sample 0 ends at 6 s, g1 at 20 s (20-21 s), g3 at 25
    s (25-26 s), under v0 alone."""
    rt = run(REPACK, groups=6, batch_groups=2, repack_fraction=0.5)
    assert decisions(rt, "repack") == [
        (5.0, {"replica": 1, "to": 0, "requests": 2, "version": 0})]
    resumed = [(t, f["group"], f["sample"], f["resumed"], f["replica"])
               for t, ev, f in rt.events if ev == "submit" and f["resumed"]]
    assert resumed == [(5.0, 3, 0, 5, 0), (5.0, 3, 1, 5, 0)]
    assert [(t, f) for t, ev, f in rt.events if ev == "pull"] == [
        (5.0, {"replica": 1, "version": 1})]
    assert dispatches(rt) == [(2.0, [0]), (5.0, [2]), (7.0, [4]), (8.0, [5]), (20.0, [1]),
                              (25.0, [3])]
    assert rt.responses[(3, 1)].version_spans == [[0, 5], [0, 20]]  # one version
    assert rt.responses[(4, 0)].version_spans == [[1, 1]]


def test_without_repack_the_new_prompts_wait_for_the_tail_worked_by_hand() -> None:
    """The same run without repack: replica 1 holds g3 to 25 s; replica 0 is free at 20 s
    (g1), pulls v2 (20-21 s: g2's step made v2 at 6 s) and takes g4 and g5 at 21 s."""
    rt = run(REPACK, groups=6, batch_groups=2, repack_fraction=0.0)
    assert decisions(rt, "repack") == []
    assert [(t, f) for t, ev, f in rt.events if ev == "pull"] == [
        (20.0, {"replica": 0, "version": 2})]
    assert dispatches(rt) == [(2.0, [0]), (5.0, [2]), (20.0, [1]), (22.0, [4]), (23.0, [5]),
                              (25.0, [3])]


def test_the_admission_rule_is_pipelinerls_by_hand() -> None:
    # U = 8, v = 2, max_lag 1: U x (v + 1 + 1) = 32 groups in all, 30 started: 2 more
    assert admission_room(30, 8, 2, 1) == 2
    assert admission_room(40, 8, 2, 1) == 0
    assert admission_room(10**6, 8, 0, -1) > 10**6  # -1: no limit


def test_admission_holds_new_batches_until_the_trainer_steps_worked_by_hand() -> None:
    """max_staleness 0, U = 1: at most v + 1 groups started. At 0 s replica 0 takes g0;
    replica 1 has no room until g0 trains (3-4 s, v1). At 4 s replica 1, waiting since 0
    s, and replica 0, since 3 s, ask again in that order; each pulls v1 (4-5 s), and
    replica 1, first, takes g1 at 5 s."""
    rt = run(PULLS, groups=2, batch_groups=1, repack_fraction=0.0, max_staleness=0)
    batches = [(t, f["replica"], f["version"]) for t, f in decisions(rt, "rollout_batch")]
    assert batches == [(0.0, 0, 0), (5.0, 1, 1)]
    assert [(t, f["replica"]) for t, ev, f in rt.events if ev == "pull"] == [(4.0, 1),
                                                                             (4.0, 0)]


def test_staleness_bound_is_none_and_plan_knows_its_knob() -> None:
    assert Laminar.staleness_bound(RunConfig(system="laminar")) is None
    assert ASYNC_STALENESS["laminar"] == ("laminar.max_staleness", (0, 1, 2, 4))


@pytest.mark.parametrize(("field", "value", "says"), [
    ("batch_groups", 0, "must be >= 1"),
    ("repack_fraction", 1.0, "must be in [0, 1)"),
    ("repack_fraction", -0.1, "must be in [0, 1)"),
    ("max_staleness", -2, "must be >= -1"),
])
def test_bad_knobs_are_refused_naming_them(field: str, value: Any, says: str) -> None:
    cfg = RunConfig(system="laminar")
    setattr(cfg.laminar, field, value)
    with pytest.raises(ConfigError, match=re.escape(f"--set laminar.{field}: {says}")):
        cfg.validate()


def test_the_table_is_written_only_for_its_system_or_when_set() -> None:
    assert "laminar" not in RunConfig(system="areal").to_dict()
    assert "laminar" in RunConfig(system="laminar").to_dict()


def test_a_cut_relay_trace_keeps_its_finished_rounds(tmp_path: Path) -> None:
    """A replica that pulls late makes tokens of an old version in a later round's
    request. Counted to rounds by version, they could land in any earlier round, so no
    round of a cut laminar trace was final; counted by time from the request's
    submission (findings-13, item 14), a request still generating touches only rounds
    from its own on, and a cut laminar trace keeps its finished rounds as pipelinerl's
    (harness.core.metrics.finished_rounds)."""
    for system in ("laminar", "pipelinerl"):
        cfg = RunConfig(system=system, workload="sci-jl", groups=4, update_groups=1, rounds=3)
        cfg.sim.rollout_engines = 2
        execute(cfg.validate(), tmp_path / "t.jsonl")
        events = read_trace(tmp_path / "t.jsonl")
        assert finished_rounds(events[:-1]), system  # cut before run_end
    from test_properties import check_prefixes

    cfg = RunConfig(system="laminar", workload="sci-jl", groups=8, update_groups=2,
                    rounds=8, seed=1)
    cfg.sim.rollout_engines = 2
    execute(cfg.validate(), tmp_path / "t.jsonl")
    events = read_trace(tmp_path / "t.jsonl")
    assert finished_rounds(events[:len(events) // 2]) == {0}
    check_prefixes(events, tmp_path / "t.jsonl")  # a final round's rows, cut anywhere


def test_the_live_engine_has_no_relay_and_says_so_once() -> None:
    """One live engine: the trainer's relay publication installed the weights in flight,
    so a pull has nothing to fetch; it returns the engine's version and is recorded once
    as not applicable."""
    from harness.live.engine import LiveEngine

    class Backend:
        version = 3  # what the last relay publication installed

    said: list[dict[str, Any]] = []
    engine = LiveEngine(backend=Backend(), prompt_ids=lambda r: [],  # type: ignore[arg-type]
                        emit=lambda ev, **f: said.append({"ev": ev, **f}))

    async def twice() -> list[int]:
        return [await engine.pull(0), await engine.pull(0)]

    assert asyncio.run(twice()) == [3, 3]
    assert [(e["what"], e["operation"]) for e in said] == [("not_applicable", "relay")]


def test_the_simulated_pool_pins_requests_and_pulls_one_replica_by_hand() -> None:
    """Two simulated replicas, 10 ms a token (tests/test_engine.py's flat engine). A is
    pinned to replica 1, B to replica 0 (the least-loaded router would have sent A to 0).
    v1 is on the relay with a 0.2 s transfer; at 0.3 s replica 0 pulls it: B has 30 tokens
    of v0, waits out the transfer and makes its other 70 under v1, done at 1.2 s; A on
    replica 1 runs on, 100 tokens of v0 at 1.0 s. A second pull finds v1 there: no wait."""
    from harness.sim.engine import SimEngine
    from harness.sim.placement import EnginePool
    from tests import clocks
    from tests.test_engine import flat

    loop = clocks.SimClock()
    events: list[tuple[str, dict[str, Any]]] = []

    def emit(ev: str, **fields: Any) -> None:
        events.append((ev, fields))

    engines = [SimEngine(loop, flat(), 10**6, 64, emit, lambda r: 100, index=i)
               for i in range(2)]
    pool = EnginePool(engines, lambda *a: engines[0], 2, 1, emit)
    pool.relay = (1, 0.2)
    ends: dict[str, float] = {}

    async def serve(request: Request) -> Response:
        response = await pool.submit(request)
        ends[request.id] = loop.time()
        return response

    async def main() -> tuple[list[Response], list[int], float]:
        a = clocks.spawn(serve(Request(0, 0, 0, Prompt(0, 10), 10**6, replica=1)))
        b = clocks.spawn(serve(Request(0, 1, 0, Prompt(1, 10), 10**6, replica=0)))
        await clocks.sleep(0.3)
        first = await pool.pull(0)
        pulled_at = loop.time()
        versions = [first, await pool.pull(0)]
        assert loop.time() == pulled_at  # already there: no transfer
        return [await a, await b], versions, pulled_at

    try:
        (a, b), versions, pulled_at = loop.run_until_complete(main())
    finally:
        loop.close()
    assert [f["engine"] for ev, f in events if ev == "request_submit"] == [1, 0]
    assert pulled_at == pytest.approx(0.5) and versions == [1, 1]
    assert [e.version for e in engines] == [1, 0]  # replica 1 never pulled
    assert b.version_spans == [[0, 30], [1, 70]] and ends["1.0"] == pytest.approx(1.2)
    assert a.version_spans == [[0, 100]] and ends["0.0"] == pytest.approx(1.0)
