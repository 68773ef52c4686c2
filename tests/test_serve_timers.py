"""A served group's checks where nothing can wait for one or cut it (no reward workers, no
adaptive limit): each check is its timer alone (harness/sim/serve.py), with `_Check`'s
draw and times, and no `_Check` made. Times worked out by hand from the latencies."""

from __future__ import annotations

from typing import Any

import pytest

from harness.core.runtime import Group, Prompt, Request, Response
from harness.sim import components
from harness.sim.components import SimVerifier
from harness.sim.serve import GroupService
from tests import clocks
from workloads.trace_source import TraceHidden


class _Engine:
    """Answers sample k at 1 + k seconds with 5 tokens (the first truncated at 5)."""

    def __init__(self, heap: clocks.SimClock) -> None:
        self.heap = heap

    def submit_many(self, requests: list[Request], done: Any) -> None:
        for request in requests:
            response = Response(request, 5, [[0, 5]], "finished", request.sample == 0)
            self.heap.call_later(1.0 + request.sample, done, response)


class _Runtime:
    def __init__(self, workers: int) -> None:
        self.heap = clocks.SimClock()
        self.engine = _Engine(self.heap)
        self.verifier = SimVerifier(self.heap.driver, workers)
        self.config = type("C", (), {"max_response_tokens": 5})()
        self.log: list[tuple[float, str]] = []

    def emit(self, ev: str, **_: Any) -> None:
        self.log.append((self.heap.now, ev))

    def after_materialize_delay(self, then: Any) -> None:
        self.heap.call_later(0.5, then)

    def materialized(self, group: Group) -> None:
        self.log.append((self.heap.now, "materialized"))


class _NoCheck:
    def __init__(self, *_: Any) -> None:
        raise AssertionError("a check with nothing to wait for made a _Check")


@pytest.mark.parametrize("workers", [0, 1])
def test_a_group_s_checks_end_at_their_latencies(
        workers: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # samples return at 1 s, 2 s and 3 s; their checks take 3, 0.5 and 1 s: scored at 4,
    # 2.5 and 4 s (one worker: 4, 4.5 and 5.5 s, each a turn later); materialised 0.5 s
    # after the last; the truncated sample 0 scores 0
    if workers == 0:
        monkeypatch.setattr(components, "_Check", _NoCheck)
    rt = _Runtime(workers)
    hidden = TraceHidden((5, 5, 5), (1.0, 1.0, 0.0), verify_s=(3.0, 0.5, 1.0))
    group = Group(0, 0, Prompt(0, 10, hidden=hidden))
    service = GroupService(rt, group, 3, 0, None, None, False)
    rt.heap.run()
    assert service.result() is group
    assert group.rewards == [0.0, 1.0, 0.0]
    assert [r.verify_s for r in group.responses] == [3.0, 0.5, 1.0]
    done = 4.5 if workers == 0 else 6.0
    assert rt.log == [(3.0, "group_complete"), (done, "materialized")]
