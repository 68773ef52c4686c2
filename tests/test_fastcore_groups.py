"""A served group's returns and checks run by the compiled core (harness/sim/fastcore/
groups.py): the core's timer heap pops in (when, seq) order; a group served on the compiled
pool gives what it gives on `EnginePool` (the same events, responses, rewards, check times
and the same places in the heap's order for Python's own entries at tied instants), with
Python called at the K-th return and the K-th score only.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("numba") is None:  # looked for, not imported: see conftest
    pytest.skip("numba is not installed", allow_module_level=True)

import numpy as np  # noqa: E402

from harness.core.runtime import Group, Prompt  # noqa: E402
from harness.sim.co import Driver  # noqa: E402
from harness.sim.components import SimVerifier  # noqa: E402
from harness.sim.heap import Heap  # noqa: E402
from harness.sim.serve import GroupService  # noqa: E402
from harness.sim.trace_buffer import BufferedTraceWriter  # noqa: E402
from tests.test_core_pool import _pool  # noqa: E402
from workloads.trace_source import TraceHidden  # noqa: E402


def test_the_timer_heap_pops_by_when_then_seq() -> None:
    from harness.sim.fastcore.groups import _t_pop, t_push

    tt, tq, tn = np.empty(8), np.empty((8, 3), dtype=np.int64), np.zeros(1, dtype=np.int64)
    rows = [(2.0, 5), (1.0, 9), (2.0, 3), (0.5, 7), (1.0, 8), (3.0, 1), (0.5, 2)]
    for k, (t, seq) in enumerate(rows):
        t_push(tt, tq, tn, t, seq, k % 2, k)
    popped = []
    while tn[0]:
        popped.append((float(tt[0]), int(tq[0, 0]), int(tq[0, 2])))
        _t_pop(tt, tq, tn)
    assert popped == [(0.5, 2, 6), (0.5, 7, 3), (1.0, 8, 4), (1.0, 9, 1), (2.0, 3, 2),
                      (2.0, 5, 0), (3.0, 1, 5)]


# latencies with ties (0 s: the check ends at its return; 0.3 s thrice) and truncated
# samples (3-5 reach the 30 tokens asked: reward 0)
HIDDEN = TraceHidden((30,) * 6, (1.0, 0.0, 1.0, 1.0, 1.0, 0.0),
                     verify_s=(0.0, 0.3, 0.3, 0.0, 0.1, 0.3))


class _Runtime:
    """What `serve` reads of the runtime; the control node's time per group is 0 (its
    entry ties with whatever else is due then)."""

    def __init__(self, compiled: bool, tmp_path: Path) -> None:
        self.heap = Heap()
        self.writer = BufferedTraceWriter(tmp_path / f"{compiled}.jsonl", self.heap.time,
                                          write=False)
        self.engine = _pool(self.heap, self.writer, compiled)
        self.verifier = SimVerifier(Driver(self.heap))
        self.config = type("C", (), {"max_response_tokens": 30})()
        self.log: list[Any] = []

    def emit(self, ev: str, **fields: Any) -> None:
        self.log.append((self.heap.now, ev, fields["group"]))

    def after_materialize_delay(self, then: Any) -> None:
        self.heap.call_later(0.0, then)

    def materialized(self, group: Group) -> None:
        self.log.append((self.heap.now, "materialized", group.id))


def _serve(compiled: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Group 0 at once; group 1 sent from group 0's `on_complete`. Python's own entries
    (set before the groups are served, and at each K-th response for the instant its
    check ends) log themselves, so their places among the core's entries are compared."""
    rt = _Runtime(compiled, tmp_path)
    heap = rt.heap
    calls = {"returned": 0, "last": 0}
    if compiled:
        from harness.sim.fastcore.pool import CorePool

        def counted(name: str, key: str) -> Any:
            call = getattr(CorePool, name)

            def counting(self: Any, i: int) -> None:
                calls[key] += 1
                call(self, i)
            return counting

        for name, key in (("_returned", "returned"), ("_last_returned", "last")):
            monkeypatch.setattr(CorePool, name, counted(name, key))
    groups = [Group(g, 0, Prompt(g, 40, hidden=HIDDEN)) for g in range(2)]
    services: list[GroupService] = []

    def probe(label: str) -> None:
        rt.log.append((heap.now, label, -1))

    def complete(group: Group) -> None:
        # due with the K-th sample's check (0.3 s), after it by seq (its time is set), and
        # before the group is materialised (the control node's entry is taken at the check)
        heap.call_later(0.3, lambda: probe(f"after {group.id}: {group.responses[5].verify_s}"))
        if group.id == 0:
            services.append(GroupService(rt, groups[1], 6, 0, complete, None, False))

    for t in (0.0, 0.1, 0.3, 0.4):
        heap.call_at(t, probe, f"early {t}")
    heap.call_soon(lambda: services.append(
        GroupService(rt, groups[0], 6, 0, complete, None, False)))
    heap.run()
    responses = [(r.request.id, r.tokens, r.truncated, r.verify_s)
                 for g in groups for r in g.responses]
    return rt.log, [g.rewards for g in groups], responses, rt.writer.events(), calls


def test_a_group_on_the_compiled_pool_as_on_enginepool(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    *core, calls = _serve(True, tmp_path, monkeypatch)
    *python, _ = _serve(False, tmp_path, monkeypatch)
    assert core == python
    log, rewards, responses, _ = core
    assert rewards == [[1.0, 0.0, 1.0, 0.0, 0.0, 0.0]] * 2
    assert [r[3] for r in responses] == list(HIDDEN.verify_s) * 2
    # the K-th response is the longest sample's (30 tokens); group 1, sent then to idle
    # replicas, takes as long again; each is materialised when its last check (0.3 s) ends
    done = log[4][0]
    assert log[4:] == [(done, "group_complete", 0), (done + 0.3, "after 0: 0.3", -1),
                       (done + 0.3, "materialized", 0), (2 * done, "group_complete", 1),
                       (2 * done + 0.3, "after 1: 0.3", -1), (2 * done + 0.3, "materialized", 1)]
    assert calls == {"returned": 0, "last": 2}  # Python: each group's K-th return only
