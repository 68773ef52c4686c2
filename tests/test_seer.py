"""Seer's rollout (systems/seer.py), worked by hand on a stand-in engine, and its chunks
on the simulator.

The stand-in: one engine serving one request at a time at 1 token a second, taking the
waiting request of lowest (priority, arrival), as the simulator's waiting queue does; a
request stops after `Request.chunk` new tokens and comes back `aborted` with them, and the
engine picks its next request once the system has sent that one back (Seer's buffer). R = 2
groups of K = 2, cap 8 tokens, chunk 2. Lengths (sample 0, sample 1): g0 (3, 4), g1 (5, 4).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from pathlib import Path
from typing import Any

import pytest

from harness.core.config import ConfigError, RunConfig
from harness.core.runtime import Group, Prompt, Request, Response
from systems import SYSTEMS
from systems.seer import PROBE, Estimates, Seer
from tests.async_view import sim_run
from tests.clocks import VirtualAsyncio

LENGTHS = {0: (3, 4), 1: (5, 4)}


class Engine:
    """One request at a time, 1 token a second; `log`: (id, start, end, status, tokens)."""

    def __init__(self) -> None:
        self.version, self.replicas = 0, 1
        self.waiting: list[tuple[int, int, Request, asyncio.Future[Response]]] = []
        self.arrivals = itertools.count()
        self.busy = False
        self.log: list[tuple[str, float, float, str, int]] = []

    def submit(self, request: Request) -> asyncio.Future[Response]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Response] = loop.create_future()
        heapq.heappush(self.waiting, (request.priority, next(self.arrivals), request, future))
        if not self.busy:
            self.busy = True
            loop.call_soon(self._next)  # after every submit of this instant, as the sim
        return future

    def _next(self) -> None:
        if not self.waiting:
            self.busy = False
            return
        _, _, request, future = heapq.heappop(self.waiting)
        made = request.resume.tokens if request.resume else 0
        left = LENGTHS[request.prompt.index][request.sample] - made
        run = min(left, request.chunk) if request.chunk else left
        status = "aborted" if run < left else "finished"
        loop = asyncio.get_running_loop()
        start = loop.time()

        def done() -> None:
            self.log.append((request.id, start, loop.time(), status, made + run))
            future.set_result(Response(request, made + run, [[0, made + run]], status))
            loop.call_soon(self._next)  # after the system has sent a chunk back

        loop.call_later(run, done)


class Runtime:
    def __init__(self, **seer: Any) -> None:
        self.config = RunConfig(system="seer", groups=2, group_size=2, update_groups=1,
                                max_response_tokens=8)
        for name, value in seer.items():
            setattr(self.config.seer, name, value)
        self.config.validate()
        self.engine = Engine()
        self.log: list[Any] = []
        self.verifier = self

    async def score(self, response: Response, timeout: Any = None) -> float:
        return 1.0

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def emit(self, ev: str, **fields: Any) -> None:
        self.log.append((ev, self.now(), fields.get("group"), fields.get("tokens")))

    async def gather(self, *waits: Any) -> list[Any]:
        return list(await asyncio.gather(*waits))

    async def materialize(self, group: Group) -> None:
        self.log.append(("materialized", self.now(), group.id, None))


def by_hand(**seer: Any) -> Runtime:
    rt = Runtime(**{"chunk_tokens": 2, **seer})
    groups = [Group(i, 0, Prompt(i, 10)) for i in range(2)]
    loop = VirtualAsyncio()
    try:
        loop.run_until_complete(Seer().rollout(rt, groups))  # type: ignore[arg-type]
    finally:
        loop.close()
    return rt


def test_probes_first_then_longest_expected_by_hand() -> None:
    """Priorities at 0: the probes (sample 0) -2^40, the others -8 (the cap: no estimate).
    0-2 g0.0's first chunk (arrived first), back at 2 - 2^40; 2-4 g1.0's, back at the same;
    4-5 g0.0 ends at 3 tokens: g0 expects 3; 5-7 g1.0 (arrived before the others' -8)
    to 4 tokens; 7-8 it ends at 5: g1 expects 5. 8-10 g0.1 (-8, arrived before g1.1),
    back at -3; 10-12 g1.1, back at -5, so it goes first: 12-14 ends at 4 (longest
    expected first, although g0.1 came back first); 14-16 g0.1 ends at 4."""
    rt = by_hand()
    assert rt.engine.log == [
        ("0.0", 0, 2, "aborted", 2), ("1.0", 2, 4, "aborted", 2), ("0.0", 4, 5, "finished", 3),
        ("1.0", 5, 7, "aborted", 4), ("1.0", 7, 8, "finished", 5),
        ("0.1", 8, 10, "aborted", 2), ("1.1", 10, 12, "aborted", 2),
        ("1.1", 12, 14, "finished", 4), ("0.1", 14, 16, "finished", 4)]
    assert [e for e in rt.log if e[0] == "decision"] == [
        ("decision", 5, 0, 3), ("decision", 8, 1, 5)]  # each group's estimate, once
    assert [(e[1], e[2]) for e in rt.log if e[0] == "materialized"] == [(14, 1), (16, 0)]


def test_without_context_arrival_order_by_hand() -> None:
    """context_aware off: every priority 0, so chunks take turns in arrival order:
    g0.0 0-2, g0.1 2-4, g1.0 4-6, g1.1 6-8 (each back with 2), g0.0 8-9 ends (3), g0.1
    9-11 ends (4: its last 2 fit one chunk), g1.0 11-13 back with 4, g1.1 13-15 ends,
    g1.0 15-16 ends. One slot does the same 16 tokens: the order moves the groups' ends."""
    rt = by_hand(context_aware=False)
    assert [(r, a, b) for r, a, b, _, _ in rt.engine.log] == [
        ("0.0", 0, 2), ("0.1", 2, 4), ("1.0", 4, 6), ("1.1", 6, 8), ("0.0", 8, 9),
        ("0.1", 9, 11), ("1.0", 11, 13), ("1.1", 13, 15), ("1.0", 15, 16)]
    assert not [e for e in rt.log if e[0] == "decision"]
    assert [(e[1], e[2]) for e in rt.log if e[0] == "materialized"] == [(11, 0), (16, 1)]


def test_whole_requests_without_chunks_by_hand() -> None:
    """chunk_tokens 0: each request is dispatched once, with the priority it had then:
    probes first (g0.0 0-3, g1.0 3-8), then the others in arrival order (both -8 when
    sent: no estimate yet), g0.1 8-12, g1.1 12-16. Re-ordering by the estimates needs
    the chunks' re-dispatch (the paper builds context-aware scheduling on divided rollout)."""
    rt = by_hand(chunk_tokens=0)
    assert [(r, a, b, s) for r, a, b, s, _ in rt.engine.log] == [
        ("0.0", 0, 3, "finished"), ("1.0", 3, 8, "finished"), ("0.1", 8, 12, "finished"),
        ("1.1", 12, 16, "finished")]


def test_priority_rule() -> None:
    est = Estimates(8, True)
    assert est.priority(0, 0, 5) == 5 - PROBE  # a probe: fewest tokens first
    assert est.priority(0, 1, 0) == -8  # no estimate yet: as long as the cap
    est.known[0] = 3  # a sibling ended first: the probe keeps its place until it ends
    assert (est.priority(0, 0, 5), est.priority(0, 1, 2)) == (5 - PROBE, -3)
    assert Estimates(8, False).priority(0, 0, 5) == 0


def test_chunks_keep_the_work_on_the_simulator(tmp_path: Path) -> None:
    """Chunks of 512 tokens: every aborted attempt stops exactly 512 tokens after it began,
    and each sample ends with the length it has as a whole request (the same work)."""
    whole = sim_run(tmp_path, "seer", seer__chunk_tokens=0)
    chunked = sim_run(tmp_path, "seer", seer__chunk_tokens=512)
    began: dict[tuple[int, int], int] = {}
    aborted = 0
    for e in chunked:
        key = (e.get("group"), e.get("sample"))
        if e["ev"] == "request_submit":
            began[key] = e.get("resumed_tokens", 0)
        elif e["ev"] == "request_finish" and e["status"] == "aborted":
            aborted += 1
            assert e["response_tokens"] == began[key] + 512
    assert aborted > 0

    def ends(events: list[dict[str, Any]]) -> dict[tuple[int, int], int]:
        return {(e["group"], e["sample"]): e["response_tokens"] for e in events
                if e["ev"] == "request_finish" and e["status"] == "finished"}

    assert ends(chunked) == ends(whole)


def test_registered_and_refusals() -> None:
    assert SYSTEMS["seer"] is Seer
    cfg = RunConfig(system="seer")
    cfg.seer.chunk_tokens = -1
    with pytest.raises(ConfigError, match=r"^--set seer.chunk_tokens: must be >= 0"):
        cfg.validate()
    # its table stays out of every other system's header while left at its defaults
    assert "seer" not in RunConfig(system="slime").to_dict()
    assert "seer" in RunConfig(system="seer").to_dict()


class Scripted:
    """A live backend whose model writes 7 tokens (1..7) and then its end of sequence."""

    version = 0

    async def generate(self, s: Any, gen: Any, on_admit: Any) -> Any:
        on_admit()
        made = len(gen.token_ids)
        new = list(range(made + 1, min(7, made + s.max_tokens) + 1))
        gen.add(new, [0.0] * len(new), "", self.version)
        gen.finish = "stop" if made + len(new) == 7 else "length"
        return gen


@pytest.mark.parametrize("chunk, attempts", [(3, [(3, "aborted"), (6, "aborted"),
                                                  (7, "finished")]),
                                             (0, [(7, "finished")]), (7, [(7, "finished")])])
def test_the_live_engine_stops_a_chunk_and_resumes(chunk: int, attempts: list[Any]) -> None:
    """Request.chunk on the live engine: 7 tokens in chunks of 3 come back aborted at 3 and
    6 and finish at 7 with every token once; chunk 0 or >= 7 is one finished attempt."""
    from harness.live.engine import LiveEngine

    async def main() -> list[tuple[int, str]]:
        engine = LiveEngine(Scripted(), lambda r: [1, 2], lambda ev, **f: None)  # type: ignore
        request = Request(0, 0, 0, Prompt(0, 2), 16, chunk=chunk)
        seen = []
        while True:
            response = await engine.submit(request)
            seen.append((response.tokens, response.status))
            if response.status == "finished":
                assert response.token_ids == list(range(1, 8))
                assert not response.truncated
                return seen
            request = request.continued(response)

    assert asyncio.run(main()) == attempts
