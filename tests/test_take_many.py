"""A router's `take_many` (a group's samples routed at once, `CorePool.submit_many`) is
`take` of each in turn: the same replicas, counts and next position, whatever the
replicas, the active ones, where the turn stands and the group's size."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.runtime import Prompt, Request
from harness.sim.dispatch import RoundRobin, StaticSplit
from harness.sim.placement import LeastLoaded

PROMPT = Prompt(0, 10)


def _group(gid: int, k: int, rnd: int = 0) -> list[Request]:
    return [Request(rnd, gid, s, PROMPT, 8) for s in range(k)]


def _pair(make, replicas: int, active: int):
    one, many = make(replicas), make(replicas)
    for router in (one, many):
        if active < replicas:
            router.active = active
    return one, many


@settings(max_examples=200, deadline=None)
@given(replicas=st.integers(1, 9), active=st.integers(1, 9),
       groups=st.lists(st.integers(0, 20), min_size=1, max_size=6),
       returned=st.lists(st.integers(0, 8), max_size=6))
def test_take_many_is_take_of_each(replicas: int, active: int, groups: list[int],
                                   returned: list[int]) -> None:
    active = min(active, replicas)
    for make in (RoundRobin, LeastLoaded, lambda r: StaticSplit(r, 24)):
        one, many = _pair(make, replicas, active)
        for gid, k in enumerate(groups):
            requests = _group(gid, k)
            assert many.take_many(requests) == [one.take(r) for r in requests]
            assert many.counts == one.counts
            for index in returned:  # some come back between groups
                if index < active and one.counts[index] > 0:
                    one.give_back(index)
                    many.give_back(index)
        assert many.take_many(_group(99, 3)) == [one.take(r) for r in _group(99, 3)]


def test_round_robin_take_many_wraps_round_the_active_replicas() -> None:
    """Three replicas, the turn at the third: a group of five goes 2, 0, 1, 2, 0, and
    the next request to 1."""
    router = RoundRobin(3)
    router.take()
    router.take()
    assert router.take_many(_group(0, 5)) == [2, 0, 1, 2, 0]
    assert router.counts == [3, 2, 2]
    assert router.take() == 1
    assert router.take_many([]) == []
