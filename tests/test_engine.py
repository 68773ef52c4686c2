"""The simulated engine against hand-computed timings.

A DecodeModel with only a fixed per-step cost makes every step take 10 ms, so
a request of n tokens alone takes n * 10 ms and all timings can be worked out
by hand.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.runtime import Prompt, Request, Response
from harness.sim.engine import SimEngine
from harness.sim.perf import DecodeModel
from harness.sim.placement import LeastLoaded
from tests import clocks

STEP = 0.01


def flat(step: float = STEP) -> DecodeModel:
    return DecodeModel(fixed_s=step, per_seq_s=0.0, weights_s=0.0, per_ctx_token_s=0.0,
                       compute_per_seq_s=0.0, prefill_per_token_s=0.0)


class Harness:
    """An engine on a virtual loop, with its events recorded."""

    def __init__(self, capacity: int = 10**6, max_running: int = 1024,
                 decode: DecodeModel | None = None) -> None:
        self.loop = clocks.SimClock()
        self.events: list[tuple[float, str, dict]] = []
        self.targets: dict[str, int] = {}
        self.engine = SimEngine(self.loop, decode or flat(), capacity, max_running, self.emit,
                                lambda r: self.targets[r.id])

    def emit(self, ev: str, **fields: object) -> None:
        self.events.append((round(self.loop.time(), 9), ev, fields))

    def request(self, group: int, tokens: int, prompt: int = 10, priority: int = 0,
                resume: Response | None = None) -> Request:
        req = Request(0, group, 0, Prompt(group, prompt), max_tokens=10**6, priority=priority,
                      resume=resume)
        self.targets[req.id] = tokens
        return req

    def run(self, coro) -> object:  # type: ignore[no-untyped-def]
        try:
            return self.loop.run_until_complete(coro)
        finally:
            self.loop.close()


def test_steps_time_closed_form_matches_hand_sums() -> None:
    memory_only = DecodeModel(1.0, 0.0, 0.0, 0.001, 0.0, 0.0)
    # contexts 10, 12, 14 -> 3 * 1 + (10 + 12 + 14) * 0.001
    assert memory_only.steps_time(3, 2, 10) == pytest.approx(3.036)
    mixed = DecodeModel(1.0, 0.0, 0.0, 0.001, 0.0055, 0.0)
    # compute 2 * 0.0055 = 0.011 beats memory 0.010 at step 0 only
    assert mixed.steps_time(3, 2, 10) == pytest.approx(3 + 0.011 + 0.012 + 0.014)
    # step 1 ends at 1.011, step 2 at 1.011 + 1.012 = 2.023
    assert mixed.steps_within(1.011, 2, 10, 3) == 1  # exactly at the end of step 1
    assert mixed.steps_within(1.0111, 2, 10, 3) == 2  # inside step 2: it finishes it
    assert mixed.steps_completed(2.0, 2, 10, 3) == 1  # step 2 is not done yet
    assert mixed.steps_completed(2.023, 2, 10, 3) == 2


def test_single_request_takes_n_steps() -> None:
    h = Harness()

    async def main() -> tuple[float, Response]:
        resp = await h.engine.submit(h.request(0, 100))
        return h.loop.time(), resp

    t, resp = h.run(main())
    assert t == pytest.approx(1.0)
    assert (resp.tokens, resp.status, resp.version_spans) == (100, "finished", [[0, 100]])


def test_abort_returns_partial_and_resume_continues() -> None:
    h = Harness()

    async def main() -> tuple[Response, Response, float]:
        fut = h.engine.submit(h.request(0, 100))
        await clocks.sleep(0.505)  # inside step 51: the engine stops now, at 50 tokens
        (partial,) = await h.engine.abort(["0.0"])
        assert (await fut) is partial
        resumed = await h.engine.submit(h.request(0, 100, resume=partial))
        return partial, resumed, h.loop.time()

    partial, resumed, t = h.run(main())
    assert partial.status == "aborted" and partial.tokens == 50
    assert resumed.tokens == 100 and resumed.status == "finished"
    assert t == pytest.approx(0.505 + 0.5)  # 50 more tokens at 10 ms


def test_priority_orders_the_waiting_queue() -> None:
    h = Harness(max_running=1)

    async def main() -> list[str]:
        low = h.engine.submit(h.request(1, 10, priority=1))
        high = h.engine.submit(h.request(2, 10, priority=0))
        await clocks.gather(low, high)
        return [f["group"] for _, ev, f in h.events if ev == "request_admit"]

    assert h.run(main()) == [2, 1]


def test_in_flight_weight_install_splits_version_spans() -> None:
    h = Harness()

    async def main() -> tuple[Response, float]:
        fut = h.engine.submit(h.request(0, 100))
        await clocks.sleep(0.3)  # 30 tokens on version 0
        await h.engine.install(1, transfer_s=0.2, in_flight=True)
        return await fut, h.loop.time()

    resp, t = h.run(main())
    assert resp.version_spans == [[0, 30], [1, 70]]
    assert resp.versions == [0, 1]
    assert t == pytest.approx(0.3 + 0.2 + 0.7)


def test_full_cache_preempts_newest_and_recomputes() -> None:
    # Two requests of prompt 10; capacity 60 tokens. Each step adds 2 tokens:
    # after 20 steps the contexts are 30 + 30 = 60 and the cache is full, so the
    # newer request (group 1) is preempted; group 0 finishes its 40 tokens,
    # then group 1 is readmitted with its 20 tokens kept.
    h = Harness(capacity=60)

    async def main() -> list[Response]:
        return list(await clocks.gather(h.engine.submit(h.request(0, 40)),
                                         h.engine.submit(h.request(1, 40))))

    first, second = h.run(main())
    preempts = [(t, f["group"]) for t, ev, f in h.events if ev == "request_preempt"]
    assert preempts == [(pytest.approx(0.2), 1)]
    assert first.tokens == 40 and second.tokens == 40
    finish = {f["group"]: t for t, ev, f in h.events if ev == "request_finish"}
    assert finish[0] == pytest.approx(0.4)  # 40 steps, never interrupted
    assert finish[1] == pytest.approx(0.4 + 0.2)  # 20 tokens left after readmission


def test_drain_pause_waits_for_running_sequences() -> None:
    h = Harness()

    async def main() -> float:
        h.engine.submit(h.request(0, 30))
        await clocks.sleep(0.1)
        await h.engine.pause("drain")
        return h.loop.time()

    assert h.run(main()) == pytest.approx(0.3)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 9), st.lists(st.tuples(st.sampled_from("tga"), st.integers(0, 99)),
                                   max_size=300))
def test_the_router_picks_what_a_scan_picks(replicas: int, ops: list[tuple[str, int]]
                                            ) -> None:
    """LeastLoaded against the scan it replaces: the fewest outstanding among the active
    replicas, the lowest index on ties, through takes, returns and resizes."""
    router = LeastLoaded(replicas)
    counts, active, out = [0] * replicas, replicas, []
    for op, x in ops:
        if op == "t":
            want = min(range(active), key=counts.__getitem__)
            assert router.take() == want
            counts[want] += 1
            out.append(want)
        elif op == "g" and out:
            index = out.pop(x % len(out))
            counts[index] -= 1
            router.give_back(index)
        elif op == "a":
            active = router.active = 1 + x % replicas
    assert router.counts == counts


def test_a_router_that_kept_no_heap_on_one_replica_picks_the_least_loaded_after() -> None:
    """On one active replica `take` reads no heap, so `give_back` keeps none; widening
    `active` rebuilds it: replica 0 takes two more on its own and gives them back, which
    leaves counts [1, 1, 0], so replica 2 comes first, then 0 (all at 1: the lowest)."""
    router = LeastLoaded(3)
    assert [router.take() for _ in range(2)] == [0, 1]
    router.active = 1
    assert [router.take() for _ in range(2)] == [0, 0]
    router.give_back(0)
    router.give_back(0)
    assert router.counts == [1, 1, 0]
    router.active = 3
    assert [router.take(), router.take()] == [2, 0]
    assert router.counts == [2, 1, 1]
