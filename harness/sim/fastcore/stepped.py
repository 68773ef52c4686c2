"""The compiled engines as one participant of the simulator's heap: requests submitted one
at a time from Python callbacks, responses handed back as heap entries, every event at the
place in the heap's order where `SimEngine`'s own would be.

This is the boundary docs/architecture.md ("The compiled core") asks for, on its smallest
scale. `SimEngine` schedules one heap entry at a time (its segment's timer or a replan)
and, through the pool, a return a turn after each finish (`EnginePool._soon`). Here each
of those takes its seq from the heap's own counter at the moment the Python engine would
take it, so the core's entries and Python's interleave by (when, seq) exactly as before:
the heap holds one entry for the core, at its earliest (when, seq); when it comes up the
core runs its events in that order for as long as they come before the heap's next entry
and the first return they produced, then hands the returns to the heap.

State lives in arrays of all replicas (per replica its scalars and three heaps of rows),
grown by doubling here in Python; the rules are timeline.py's, unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappush
from typing import Any

import numpy as np

from harness.sim.fastcore import Events
from harness.sim.fastcore.jit import njit
from harness.sim.fastcore.stepmodel import step_params
from harness.sim.fastcore.timeline import (
    CUT_ID,
    CUT_NOW,
    ENGINE,
    FINISH,
    FSIZE,
    G_NE,
    G_SEQ,
    N_ST,
    NONE,
    NOW,
    PEND_SEQ,
    PEND_T,
    PENDING,
    PREEMPT,
    PRIO,
    PROMPT,
    RSIZE,
    TARGET,
    WSIZE,
    Arr,
    B,
    compact,
    fire,
    submit_to,
)
from harness.sim.heap import Heap
from harness.sim.perf import DecodeModel, TableDecodeModel

MAX_BATCH_TABLE = 1 << 16  # a table's coefficients are kept for every batch up to the cap


@njit(cache=True)
def core_submit(p: Arr, rq: Arr, g: Arr, st2: Arr, fs2: Arr, wh3: Arr, ev_t: Arr, ev: Arr,
                i: int, e: int, now: float) -> None:
    fs2[e, NOW] = now
    submit_to(p, rq, g, st2[e], fs2[e], wh3[e], ev_t, ev, i)


@njit(cache=True)
def next_engine(st2: Arr, fs2: Arr) -> int:
    """The replica whose heap entry comes first by (when, seq); -1: none has one."""
    best = -1
    for e in range(st2.shape[0]):
        if st2[e, PENDING] == NONE:
            continue
        if best < 0 or fs2[e, PEND_T] < fs2[best, PEND_T] or (
                fs2[e, PEND_T] == fs2[best, PEND_T] and st2[e, PEND_SEQ] < st2[best, PEND_SEQ]):
            best = e
    return best


@njit(cache=True)
def core_run(p: Arr, rq: Arr, g: Arr, st2: Arr, fs2: Arr, wh3: Arr, fh3: Arr, rs3: Arr,
             ev_t: Arr, ev: Arr, capacity: int, max_running: int, limit_t: float,
             limit_seq: int) -> int:
    """The replicas' entries in (when, seq) order while they come before the limit (the
    heap's next entry, then also the first return made here); -1 when done, else the
    replica that needs more room in the arrays before its entry can run."""
    while True:
        e = next_engine(st2, fs2)
        if e < 0:
            return -1
        t, s = fs2[e, PEND_T], st2[e, PEND_SEQ]
        if t > limit_t or (t == limit_t and s > limit_seq):
            return -1
        inflight = st2[e, WSIZE] + st2[e, B]
        if (g[G_NE] + 3 * inflight + 2 > ev_t.shape[0] or st2[e, FSIZE] + inflight + 1
                > fh3.shape[1] or st2[e, RSIZE] + inflight + 1 > rs3.shape[1]):
            return e
        ne = g[G_NE]
        fire(p, rq, g, st2[e], fs2[e], wh3[e], fh3[e], rs3[e], ev_t, ev, capacity,
              max_running)
        for k in range(ne, g[G_NE]):
            if ev[k, 0] == FINISH:  # the first return of this turn: nothing after it runs
                if t < limit_t or ev[k, 4] < limit_seq:
                    limit_t, limit_seq = t, ev[k, 4]
                break


def _grown(a: np.ndarray, axis: int, need: int) -> np.ndarray:
    if a.shape[axis] >= need:
        return a
    shape = list(a.shape)
    shape[axis] = max(need, 2 * a.shape[axis])
    out = np.empty(shape, dtype=a.dtype)
    out[tuple(slice(0, n) for n in a.shape)] = a
    return out


class SteppedEngines:
    """`engines` replicas of one engine (`decode`, a KV cache of `kv` tokens, at most
    `max_running` sequences) on `heap`; `on_return(i)` is called a turn after request
    `i` (the index `submit` gave it) ends, as the pool calls a request's `done`. `room`:
    the arrays' first size (they double as needed; a test starts them at 1)."""

    def __init__(self, heap: Heap, decode: DecodeModel | TableDecodeModel, kv: int,
                 max_running: int, engines: int, on_return: Callable[[int], Any],
                 room: int = 64) -> None:
        if type(decode) is TableDecodeModel and max_running > MAX_BATCH_TABLE:
            raise ValueError(f"the compiled core keeps a table's batches up to "
                             f"{MAX_BATCH_TABLE}, not max_running {max_running}")
        self.heap, self.on_return = heap, on_return
        self.kv, self.max_running = int(kv), int(max_running)
        self.p = step_params(decode, min(self.max_running, MAX_BATCH_TABLE))
        self.n = 0
        self.rq = np.zeros((16 * room, 9), dtype=np.int64)
        self.g = np.zeros(2, dtype=np.int64)
        self.st = np.zeros((engines, N_ST), dtype=np.int64)
        self.st[:, ENGINE] = np.arange(engines)
        self.st[:, CUT_ID] = -1
        self.fs = np.zeros((engines, 4), dtype=np.float64)
        self.fs[:, CUT_NOW] = -1.0
        self.wh = np.empty((engines, room, 3), dtype=np.int64)
        self.fh = np.empty((engines, room, 3), dtype=np.int64)
        self.rs = np.empty((engines, room, 2), dtype=np.int64)
        self.ev_t = np.empty(64 * room, dtype=np.float64)
        self.ev = np.empty((64 * room, 5), dtype=np.int64)
        self.entry: list[Any] | None = None  # the core's one entry on the heap
        # the core's entries still in the heap's queue, the cancelled ones too, by (when,
        # seq): one armed again is revived, never pushed twice (the heap compares an
        # entry's callback where (when, seq) tie)
        self.queued: dict[tuple[float, int], list[Any]] = {}

    def submit(self, engine: int, priority: int, prompt: int, target: int) -> int:
        """A request to replica `engine`, now; returns its index."""
        if target < 1:
            raise ValueError(f"request {self.n}: nothing left to generate")
        i, st = self.n, self.st
        self.rq = _grown(self.rq, 0, i + 1)
        self.rq[i] = 0  # a grown array's new rows are not cleared (no tokens made yet)
        self.rq[i, PRIO], self.rq[i, PROMPT], self.rq[i, TARGET] = priority, prompt, target
        self.n = i + 1
        # a request is queued at most once: in flight (waiting or running) bounds the queue
        self.wh = _grown(self.wh, 1, int(st[engine, WSIZE] + st[engine, B]) + 1)
        self.ev_t = _grown(self.ev_t, 0, int(self.g[G_NE]) + 1)
        self.ev = _grown(self.ev, 0, int(self.g[G_NE]) + 1)
        heap = self.heap
        self.g[G_SEQ] = heap._seq  # noqa: SLF001  (the heap's counter, taken and given back)
        core_submit(self.p, self.rq, self.g, st, self.fs, self.wh, self.ev_t, self.ev, i,
                    engine, heap.now)
        heap._seq = int(self.g[G_SEQ])  # noqa: SLF001
        self._arm()
        return i

    def _arm(self) -> None:
        """The core's heap entry at its earliest (when, seq), if that moved."""
        e = next_engine(self.st, self.fs)
        entry = self.entry
        key = (float(self.fs[e, PEND_T]), int(self.st[e, PEND_SEQ])) if e >= 0 else None
        if entry is not None:
            if (entry[0], entry[1]) == key:
                return
            entry[2] = self._left  # cancelled: it only leaves the queue when it comes up
        self.entry = None
        if key is None:
            return
        entry = self.queued.get(key)
        if entry is None:
            entry = self.queued[key] = [key[0], key[1], self._fire, (key,)]
            heappush(self.heap._queue, entry)  # noqa: SLF001  (an entry with its own seq)
        else:
            entry[2] = self._fire
        self.entry = entry

    def _left(self, key: tuple[float, int]) -> None:
        del self.queued[key]

    def _fire(self, key: tuple[float, int]) -> None:
        del self.queued[key]
        self.entry = None
        heap = self.heap
        queue = heap._queue  # noqa: SLF001
        while True:
            limit_t, limit_seq = (queue[0][0], queue[0][1]) if queue else (np.inf, 1 << 62)
            start = int(self.g[G_NE])
            self.g[G_SEQ] = heap._seq  # noqa: SLF001
            e = core_run(self.p, self.rq, self.g, self.st, self.fs, self.wh, self.fh, self.rs,
                         self.ev_t, self.ev, self.kv, self.max_running, float(limit_t),
                         int(limit_seq))
            heap._seq = int(self.g[G_SEQ])  # noqa: SLF001
            rows = self.ev[start:int(self.g[G_NE])]
            for k in np.flatnonzero(rows[:, 0] == FINISH).tolist():
                heappush(queue, [float(self.ev_t[start + k]), int(rows[k, 4]), self.on_return,
                                 (int(rows[k, 1]),)])
            if e < 0:
                break
            self._room(e)
        self._arm()

    def _room(self, e: int) -> None:
        """Room for what replica `e`'s next entry may add (timeline.run_engines' bound)."""
        st = self.st
        inflight = int(st[e, WSIZE] + st[e, B])
        need = int(self.g[G_NE]) + 3 * inflight + 2
        self.ev_t, self.ev = _grown(self.ev_t, 0, need), _grown(self.ev, 0, need)
        self.fh = _grown(self.fh, 1, int(st[e, FSIZE]) + inflight + 1)
        if st[e, RSIZE] + inflight + 1 > self.rs.shape[1]:
            st[e, RSIZE] = compact(self.rq, self.rs[e], int(st[e, RSIZE]))
            self.rs = _grown(self.rs, 1, int(st[e, RSIZE]) + inflight + 1)

    def events(self) -> Events:
        """The events so far, in the order they were emitted."""
        ne = int(self.g[G_NE])
        ev = self.ev[:ne]
        return Events(self.ev_t[:ne].copy(), ev[:, 0].copy(), ev[:, 1].copy(), ev[:, 2].copy(),
                      ev[:, 3].copy(), int((ev[:, 0] == PREEMPT).sum()))
