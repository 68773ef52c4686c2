"""The compiled engines stepped on the simulator's heap (harness/sim/fastcore/stepped.py)
against `SimEngine` on the same heap, with a system's feedback: a response's return
submits the next request (`reference.closed_loop`). Compared: every event in the order
it was emitted, across replicas too, so each of the core's entries and returns came at the
place in the heap's (when, seq) order where the Python engine's came. The grid streams
(steps of 1/8 s, submissions on the grid) make replicas end requests at the same instants,
so returns and other replicas' timers tie on the heap. The core's arrays start at one row
(`room=1`), so every path that grows them is taken; numba checks no index, so a run
under NUMBA_BOUNDSCHECK=1 (with its own NUMBA_CACHE_DIR) is the check that none overflows.
"""

from __future__ import annotations

import importlib.util
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

if importlib.util.find_spec("numba") is None:  # looked for, not imported: see conftest
    pytest.skip("numba is not installed", allow_module_level=True)

from harness.sim.fastcore import Events, Stream  # noqa: E402
from harness.sim.fastcore.reference import closed_loop, random_stream  # noqa: E402
from harness.sim.heap import Heap  # noqa: E402
from harness.sim.perf import DecodeModel, TableDecodeModel  # noqa: E402
from tests.test_fastcore import kernels  # noqa: E402

GRID = DecodeModel(0.125, 0.0, 0.0, 0.0, 0.0, 1 / 64, prefill_fixed_s=0.25)
ROOF = DecodeModel(0.004, 1e-6, 0.006, 3e-9, 2e-5, 1e-5, 1e-4, 1e-9, 2e-3)


def rows(ev: Events) -> list[tuple[float, int, int, int, int]]:
    return list(zip(ev.t.tolist(), ev.kind.tolist(), ev.request.tolist(), ev.engine.tolist(),
                    ev.value.tolist(), strict=True))


def test_a_return_submits_the_next_request_a_turn_after_the_end() -> None:
    # request 0 (10 tokens, steps of 10 ms) ends at 0.1; its return submits request 1
    # (5 tokens) at 0.1, which ends at 0.15
    s = Stream(np.array([0.0, 9.0]), np.zeros(2, dtype=np.int64), np.array([4, 4]),
               np.array([10, 5]), np.zeros(2, dtype=np.int64), 1)
    ev = closed_loop(s, 1, DecodeModel(0.01, 0.0, 0.0, 0.0, 0.0, 0.0), 100, 8, True)
    assert rows(ev) == rows(closed_loop(s, 1, DecodeModel(0.01, 0.0, 0.0, 0.0, 0.0, 0.0), 100,
                                        8, False))
    assert [(k, r) for _, k, r, _, _ in rows(ev)] == [(0, 0), (1, 0), (3, 0), (0, 1), (1, 1),
                                                      (3, 1)]
    assert ev.t.tolist() == pytest.approx([0, 0, 0.1, 0.1, 0.1, 0.15])


@pytest.mark.parametrize("decode", [GRID, ROOF, kernels()], ids=["grid", "roofline", "kernels"])
def test_same_events_in_the_same_order_as_simengine_on_the_heap(
        decode: DecodeModel | TableDecodeModel) -> None:
    preempted = tied = 0
    for seed, capacity, max_running in itertools.product(range(2), (300, 3000, 10**6),
                                                         (3, 256)):
        s = random_stream(seed, 400, 4, rate=30, prompt=(0, 64), target=(1, 200), group=4,
                          priorities=2)
        if decode is GRID:
            s = Stream(np.round(s.submit_t * 8) / 8, s.priority, s.prompt, s.target, s.engine,
                       s.engines)
        fast = closed_loop(s, 80, decode, capacity, max_running, True, room=1)
        assert rows(fast) == rows(closed_loop(s, 80, decode, capacity, max_running, False))
        preempted += fast.preemptions
        tied += len(fast.t) - len(set(fast.t.tolist()))
    assert preempted > 500 and tied > 1000


def test_a_table_past_its_batches_is_refused() -> None:
    from harness.sim.fastcore.stepped import SteppedEngines  # numba: at run, not collection

    table = TableDecodeModel((1, 8), (0.01, 0.02), (0.0, 0.0), 0.0)
    with pytest.raises(ValueError, match="not max_running 100000"):
        SteppedEngines(Heap(), table, 10**6, 100_000, 1, print)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 2), st.integers(0, 40),
                          st.integers(1, 60), st.integers(0, 2)), min_size=1, max_size=40),
       st.integers(1, 40), st.integers(1, 200), st.integers(1, 6))
def test_same_order_on_any_closed_loop(rows_: list[tuple[int, int, int, int, int]], roots: int,
                                       capacity: int, max_running: int) -> None:
    """Odd shapes: more roots than requests, idle replicas, caches below one prompt (the
    rule that stops at a return is the seeded streams' to check: these are too small)."""
    t, prio, prompt, target, engine = (np.array(c) for c in zip(*rows_, strict=True))
    s = Stream(t / 8, prio, prompt, target, engine, 3)
    decode = DecodeModel(0.125, 0.0, 0.0, 1 / 1024, 0.0, 1 / 64, prefill_fixed_s=0.25)
    assert rows(closed_loop(s, roots, decode, capacity, max_running, True, room=1)) == rows(
        closed_loop(s, roots, decode, capacity, max_running, False))


@settings(max_examples=60, deadline=None)
@given(engines=st.integers(1, 40), steps=st.lists(
    st.tuples(st.integers(0, 39), st.integers(0, 2), st.integers(0, 4), st.booleans()),
    min_size=1, max_size=200))
def test_the_tree_of_next_entries_finds_what_a_scan_finds(
        engines: int, steps: list[tuple[int, int, int, bool]]) -> None:
    """`next_engine` from its tree, its replicas marked as their entries are set
    (`_dirty`), whether read after each change, after many, or after more changes than
    its stack holds, names the replica a scan of all of them names (ties in time broken
    by seq, the first of equal entries)."""
    from harness.sim.fastcore.control import ST_COLS
    from harness.sim.fastcore.next_entry import _scan, next_engine
    from harness.sim.fastcore.stepped import SteppedEngines
    from harness.sim.fastcore.timeline import PEND_SEQ, PEND_T, PENDING, _dirty

    core = SteppedEngines(Heap(), GRID, 1 << 20, 8, engines, lambda i: None)
    g, stt, fs = core.g, np.zeros((engines, ST_COLS), dtype=np.int64), core.fs
    seq = 0
    for e, kind, when, read in steps:
        e %= engines
        seq += 1
        stt[e, PENDING], stt[e, PEND_SEQ], fs[e, PEND_T] = kind, seq, float(when)
        _dirty(g, e)
        if read:
            assert next_engine(stt, fs, g) == _scan(stt, fs)
    assert next_engine(stt, fs, g) == _scan(stt, fs)
