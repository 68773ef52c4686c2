"""`SteppedEngines` with a leaner crossing, for the compiled pool (harness/sim/fastcore/
pool.py): one compiled call a submission and one a turn of the core, each returning the
core's next (when, seq) and taking and giving back the heap's counter, so that Python
reads no array element between calls; the arrays grow only when a call says it lacks
room. The rules and the order are stepped.py's (the same `submit_to`, `core_run` and
`next_engine`); only the calls around them change.

Where a request's time goes with one crossing a submission (the RolloutPipe grid, CPU):
docs/simulated-core.md, "Measured figures" (the compiled pool in real runs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from heapq import heappush
from typing import Any

import numpy as np

from harness.sim.fastcore import control
from harness.sim.fastcore.control import G_NSP, OPEN_VERSION, REPLICA, VERSION
from harness.sim.fastcore.jit import Direct, njit
from harness.sim.fastcore.next_entry import next_engine
from harness.sim.fastcore.stepped import SteppedEngines, _grown, core_run
from harness.sim.fastcore.timeline import (
    G_NE,
    G_SEQ,
    NOW,
    PEND_SEQ,
    PEND_T,
    PRIO,
    PROMPT,
    TARGET,
    WSIZE,
    Arr,
    B,
    submit_to,
)

ROOM = -2  # a call's answer: the arrays need to grow first (nothing was done)


@njit(cache=True)
def _next(st: Arr, fs: Arr, g: Arr, seq: int) -> tuple[int, float, int, int]:
    b = next_engine(st, fs, g)
    if b < 0:
        return -1, 0.0, 0, seq
    return b, fs[b, PEND_T], st[b, PEND_SEQ], seq


@njit(cache=True)
def lean_submit(p: Arr, rq: Arr, g: Arr, st: Arr, fs: Arr, wh: Arr, ev_t: Arr, ev: Arr,
                i: int, e: int, now: float, priority: int, prompt: int, target: int,
                seq: int) -> tuple[int, float, int, int]:
    """Request `i` to replica `e` now, the heap's counter at `seq`; returns the replica
    whose entry comes first, its (when, seq), and the counter (ROOM: grow, call again)."""
    if (i >= rq.shape[0] or st[e, WSIZE] + st[e, B] + 1 > wh.shape[1]
            or g[G_NE] + 1 > ev_t.shape[0]):
        return ROOM, 0.0, 0, seq
    rq[i, :] = 0  # a grown array's new rows are not cleared
    rq[i, PRIO], rq[i, PROMPT], rq[i, TARGET] = priority, prompt, target
    rq[i, OPEN_VERSION], rq[i, REPLICA] = st[e, VERSION], e  # control.py's (its calls)
    g[G_SEQ] = seq
    fs[e, NOW] = now
    ne = g[G_NE]
    submit_to(p, rq, g, st[e], fs[e], wh[e], ev_t, ev, i)
    g[G_NE] = ne  # its one event, request_submit, is the caller's to write: it knows it
    return _next(st, fs, g, g[G_SEQ])


@njit(cache=True)
def lean_submit_many(p: Arr, rq: Arr, g: Arr, st: Arr, fs: Arr, wh: Arr, ev_t: Arr, ev: Arr,
                     i0: int, engine: Arr, now: float, priority: Arr, prompt: Arr,
                     target: Arr, seq: int) -> tuple[int, float, int, int]:
    """`lean_submit` of requests i0, i0 + 1, ... (one a row of the columns) in turn, as
    that many calls would make them; ROOM (nothing done) unless all fit."""
    n = engine.shape[0]
    if i0 + n > rq.shape[0] or g[G_NE] + 1 > ev_t.shape[0]:
        return ROOM, 0.0, 0, seq
    for k in range(n):  # each replica's queue takes all of its own at most
        e = engine[k]
        more = 0
        for j in range(n):
            if engine[j] == e:
                more += 1
        if st[e, WSIZE] + st[e, B] + more > wh.shape[1]:
            return ROOM, 0.0, 0, seq
    g[G_SEQ] = seq
    ne = g[G_NE]
    for k in range(n):
        i, e = i0 + k, engine[k]
        rq[i, :] = 0
        rq[i, PRIO], rq[i, PROMPT], rq[i, TARGET] = priority[k], prompt[k], target[k]
        rq[i, OPEN_VERSION], rq[i, REPLICA] = st[e, VERSION], e
        fs[e, NOW] = now
        submit_to(p, rq, g, st[e], fs[e], wh[e], ev_t, ev, i)
        g[G_NE] = ne
    return _next(st, fs, g, g[G_SEQ])


@njit(cache=True)
def lean_resumed(p: Arr, rq: Arr, g: Arr, st: Arr, fs: Arr, wh: Arr, ev_t: Arr, ev: Arr,
                 sp: Arr, i: int, e: int, now: float, priority: int, prompt: int,
                 target: int, resumed: int, spans: Arr, seq: int) -> tuple[int, float, int, int]:
    """`lean_submit` of a request going on from `resumed` tokens, made in `spans` ((version,
    tokens) rows, none or more): they become its linked span rows, copied as they are
    (`SteppedEngines._spans`), then control.py's `submit`; ROOM (nothing done) unless the
    request, its queue's row, an event and its spans fit."""
    n, k = spans.shape[0], g[G_NSP]
    if (i >= rq.shape[0] or st[e, WSIZE] + st[e, B] + 1 > wh.shape[1]
            or g[G_NE] + 1 > ev_t.shape[0] or k + n > sp.shape[0]):
        return ROOM, 0.0, 0, seq
    first = last = 0  # no span (row 0 is none)
    if n > 0:
        for j in range(n):
            sp[k + j, 0], sp[k + j, 1], sp[k + j, 2] = spans[j, 0], spans[j, 1], k + j + 1
        sp[k + n - 1, 2] = 0
        g[G_NSP] = k + n
        first, last = k, k + n - 1
    g[G_SEQ] = seq
    ne = g[G_NE]
    control.submit(p, rq, g, st, fs, wh, ev_t, ev, i, e, now, priority, prompt, target,
                   resumed, first, last)
    g[G_NE] = ne  # its request_submit is the caller's to write, as `lean_submit`'s
    return _next(st, fs, g, g[G_SEQ])


@njit(cache=True)
def lean_run(p: Arr, rq: Arr, g: Arr, st: Arr, fs: Arr, wh: Arr, fh: Arr, rs: Arr, ev_t: Arr,
             ev: Arr, capacity: int, max_running: int, limit_t: float, limit_seq: int,
             seq: int) -> tuple[int, int, float, int, int]:
    """`core_run` from the heap's counter at `seq`; returns the replica that needs room
    (-1: none), then `_next`'s four."""
    g[G_SEQ] = seq
    e = core_run(p, rq, g, st, fs, wh, fh, rs, ev_t, ev, capacity, max_running, limit_t,
                 limit_seq)
    b, t, s, seq = _next(st, fs, g, g[G_SEQ])
    return e, b, t, s, seq


# called through their entry points (harness/sim/fastcore/jit.py's `Direct`: the core's
# own arrays and new ones of int64, the scalars cast where they could be of another type)
LEAN_SUBMIT, LEAN_SUBMIT_MANY = Direct(lean_submit), Direct(lean_submit_many)
LEAN_RUN, LEAN_RESUMED = Direct(lean_run), Direct(lean_resumed)


class LeanEngines(SteppedEngines):
    """`SteppedEngines` crossed once a submission and once a turn. A submission leaves
    no event in the arrays (its caller writes request_submit); after a turn `sink()` takes
    the events the turn made and pushes the returns."""

    sink: Callable[[], None]

    def submit(self, engine: int, priority: int, prompt: int, target: int) -> int:
        i, heap = self.n, self.heap
        while True:
            b, t, s, seq = LEAN_SUBMIT.call(self.p, self.rq, self.g, self.st, self.fs,
                                            self.wh, self.ev_t, self.ev, i, engine,
                                            float(heap.now), priority, prompt, target,
                                            heap._seq)  # noqa: SLF001
            if b != ROOM:
                break
            self._room_for(i, engine)
        heap._seq = seq  # noqa: SLF001
        self.n = i + 1
        self._arm_at(b, t, s)
        return i

    def _room_for(self, i: int, engine: int) -> None:
        """The arrays grown for request `i` on `engine` (a submission answered ROOM)."""
        self.rq = _grown(self.rq, 0, i + 1)
        st = self.st
        self.wh = _grown(self.wh, 1, int(st[engine, WSIZE] + st[engine, B]) + 1)
        need = int(self.g[G_NE]) + 1
        self.ev_t, self.ev = _grown(self.ev_t, 0, need), _grown(self.ev, 0, need)

    def submit_resumed(self, engine: int, priority: int, prompt: int, target: int,
                       resumed: int, spans: Sequence[Sequence[int]]) -> int:
        """`SteppedEngines.submit_resumed` in one compiled call (`lean_resumed`); like
        `submit`, it leaves no event (the caller writes request_submit)."""
        if target <= resumed:
            raise ValueError(f"request {self.n}: nothing left to generate")
        i, heap = self.n, self.heap
        rows = np.array(spans, dtype=np.int64).reshape(-1, 2)
        while True:
            b, t, s, seq = LEAN_RESUMED.call(self.p, self.rq, self.g, self.st, self.fs,
                                             self.wh, self.ev_t, self.ev, self.sp, i,
                                             engine, float(heap.now), priority, prompt,
                                             target, resumed, rows,
                                             heap._seq)  # noqa: SLF001
            if b != ROOM:
                break
            self._room_for(i, engine)
            self.sp = _grown(self.sp, 0, int(self.g[G_NSP]) + len(rows))
        heap._seq = seq  # noqa: SLF001
        self.n = i + 1
        self._arm_at(b, t, s)
        return i

    def submit_many(self, engine: list[int], priority: list[int], prompt: list[int],
                    target: list[int]) -> int:
        """`submit` of each (engine, priority, prompt, target) in turn, in one call;
        returns the first's index (the rest follow)."""
        i, heap, n = self.n, self.heap, len(engine)
        engines = np.array(engine, dtype=np.int64)
        cols = (np.array(priority, dtype=np.int64), np.array(prompt, dtype=np.int64),
                np.array(target, dtype=np.int64))
        while True:
            b, t, s, seq = LEAN_SUBMIT_MANY.call(self.p, self.rq, self.g, self.st, self.fs,
                                                 self.wh, self.ev_t, self.ev, i, engines,
                                                 float(heap.now), *cols,
                                                 heap._seq)  # noqa: SLF001
            if b != ROOM:
                break
            self.rq = _grown(self.rq, 0, i + n)
            st = self.st
            most = max(int(st[e, WSIZE] + st[e, B]) + engine.count(e) for e in set(engine))
            self.wh = _grown(self.wh, 1, most)
            need = int(self.g[G_NE]) + 1
            self.ev_t, self.ev = _grown(self.ev_t, 0, need), _grown(self.ev, 0, need)
        heap._seq = seq  # noqa: SLF001
        self.n = i + n
        self._arm_at(b, t, s)
        return i

    def _arm_at(self, b: int, t: float, s: int) -> None:
        """`_arm` with the key the core gave (b < 0: no entry due)."""
        entry = self.entry
        if entry is not None:
            if b >= 0 and entry[0] == t and entry[1] == s:
                return
            entry[2] = self._left  # cancelled: it only leaves the queue when it comes up
        self.entry = None
        if b < 0:
            return
        key = (t, s)
        entry = self.queued.get(key)
        if entry is None:
            entry = self.queued[key] = [t, s, self._fire, (key,)]
            heappush(self.heap._queue, entry)  # noqa: SLF001
        else:
            entry[2] = self._fire
        self.entry = entry

    def _fire(self, key: tuple[float, int]) -> None:
        del self.queued[key]
        self.entry = None
        heap = self.heap
        queue: list[Any] = heap._queue  # noqa: SLF001
        while True:
            limit_t, limit_seq = ((float(queue[0][0]), queue[0][1]) if queue
                                  else (np.inf, 1 << 62))
            e, b, t, s, seq = LEAN_RUN.call(self.p, self.rq, self.g, self.st, self.fs,
                                            self.wh, self.fh, self.rs, self.ev_t, self.ev,
                                            self.kv, self.max_running, limit_t, limit_seq,
                                            heap._seq)  # noqa: SLF001
            heap._seq = seq  # noqa: SLF001
            self.sink()  # the returns pushed before a retry reads the queue's head
            if e < 0:
                break
            self._room(e)
        self._arm_at(b, t, s)
