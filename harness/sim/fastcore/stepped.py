"""The compiled engines as one participant of the simulator's heap: requests submitted one
at a time from Python callbacks, responses handed back as heap entries, every event at the
place in the heap's order where `SimEngine`'s own would be.

This is the boundary docs/simulated-core.md ("The compiled core") describes, on its smallest
scale. `SimEngine` schedules one heap entry at a time (its segment's timer or a replan)
and, through the pool, a return a turn after each finish (`EnginePool._soon`). Here each
of those takes its seq from the heap's own counter at the moment the Python engine would
take it, so the core's entries and Python's interleave by (when, seq) exactly as before:
the heap holds one entry for the core, at its earliest (when, seq); when it comes up the
core runs its events in that order for as long as they come before the heap's next entry
and the first return they produced, then hands the returns to the heap.

State lives in arrays of all replicas (per replica its scalars and three heaps of rows),
grown by doubling here in Python; the rules are timeline.py's, with control.py's for the
replica calls (abort, pause, drain, resume, a weight install) and the pause states.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from heapq import heappush
from typing import Any

import numpy as np

from harness.sim.fastcore import Events, control
from harness.sim.fastcore.choice import MAX_BATCH_TABLE, past_table
from harness.sim.fastcore.control import (
    ABORTED,
    DRAIN,
    DRAINING,
    G_COLS,
    G_NSP,
    GOING,
    MODES,
    OPEN_FROM,
    OPEN_VERSION,
    PAUSED,
    RECOMPUTE,
    RQ_COLS,
    SPAN_FIRST,
    ST_COLS,
    STOPPED,
    VERSION,
)
from harness.sim.fastcore.jit import Direct, njit
from harness.sim.fastcore.next_entry import next_engine, with_tree
from harness.sim.fastcore.stepmodel import Priced, step_params
from harness.sim.fastcore.timeline import (
    CUT_ID,
    CUT_NOW,
    ENGINE,
    FINISH,
    FIRST_ADMIT,
    FSIZE,
    G_CALL,
    G_NE,
    G_SEQ,
    GEN0,
    LAST_FINISH,
    N_FS,
    NOW,
    PEND_SEQ,
    PEND_T,
    PENDING,
    PREEMPT,
    REPLAN,
    RSIZE,
    STATE,
    WSIZE,
    Arr,
    B,
    _unschedule,
    compact,
    fire,
)
from harness.sim.heap import Heap

OUTCOMES = Direct(control.outcomes)  # its entry point (jit.py): the core's arrays, int64 rows


@njit(cache=True)
def core_run(p: Arr, rq: Arr, g: Arr, st2: Arr, fs2: Arr, wh3: Arr, fh3: Arr, rs3: Arr,
             ev_t: Arr, ev: Arr, capacity: int, max_running: int, limit_t: float,
             limit_seq: int) -> int:
    """The replicas' entries in (when, seq) order while they come before the limit (the
    heap's next entry, then also the first return made here). A replan of a paused
    replica does nothing (`_plan` returns); a draining one admits none. Returns -1 when
    done; e >= 0: replica e needs more room in the arrays first; -2 - e: replica e's
    drain is over (`_plan` found it empty while a drain waited), to be told at once, as
    `_plan` sets the drain's Wait. It also stops (-1) after an entry whose `_plan` left a
    call for the GPU share (G_CALL: harness/sim/fastcore/share.py)."""
    while True:
        e = next_engine(st2, fs2, g)
        if e < 0:
            return -1
        st, fs = st2[e], fs2[e]
        t, s = fs[PEND_T], st[PEND_SEQ]
        if t > limit_t or (t == limit_t and s > limit_seq):
            return -1
        inflight = st[WSIZE] + st[B]
        if (g[G_NE] + 3 * inflight + 2 > ev_t.shape[0] or st[FSIZE] + inflight + 1
                > fh3.shape[1] or st[RSIZE] + inflight + 1 > rs3.shape[1]):
            return e
        ne = g[G_NE]
        if st[PENDING] == REPLAN and st[PAUSED] == STOPPED:
            fs[NOW] = t
            _unschedule(g, st)
            continue
        fire(p, rq, g, st, fs, wh3[e], fh3[e], rs3[e], ev_t, ev, capacity,
             max_running if st[PAUSED] == GOING else 0)
        if st[DRAINING] == 1 and st[B] == 0:
            st[DRAINING] = 0
            return -2 - e
        if g[G_CALL] != 0:  # the GPU share is told now (after a drain, as `_plan` does)
            return -1
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
    `i` (the index `submit` gave it) ends, finished or aborted, as the pool calls a
    request's `done`; `outcomes` then reads its response. `room`: the arrays' first size
    (they double as needed; a test starts them at 1).

    The replica calls (`abort`, `pause_now`, `drain`, `resume_now`, `install_begin`,
    `install_end`) are `SimEngine`'s, made now on the heap's clock; a pool makes them on
    every replica as `EnginePool` does (harness/sim/fastcore/scripts.py's `PinnedPool`)."""

    def __init__(self, heap: Heap, decode: Priced, kv: int,
                 max_running: int, engines: int, on_return: Callable[[int], Any],
                 room: int = 64) -> None:
        if past_table(decode, max_running):
            raise ValueError(f"the compiled core keeps a table's batches up to "
                             f"{MAX_BATCH_TABLE}, not max_running {max_running}")
        self.heap, self.on_return = heap, on_return
        self.kv, self.max_running = int(kv), int(max_running)
        self.p = step_params(decode, min(self.max_running, MAX_BATCH_TABLE))
        self.n = 0
        self.rq = np.zeros((16 * room, RQ_COLS), dtype=np.int64)
        self.g = with_tree(G_COLS, engines)
        self.g[G_NSP] = 1  # span row 0 means none: a request row zeroed has no span
        self.st = np.zeros((engines, ST_COLS), dtype=np.int64)
        self.st[:, ENGINE] = np.arange(engines)
        self.st[:, CUT_ID] = -1
        self.fs = np.zeros((engines, N_FS), dtype=np.float64)
        self.fs[:, CUT_NOW] = -1.0
        self.fs[:, FIRST_ADMIT], self.fs[:, LAST_FINISH] = np.inf, -np.inf
        self.wh = np.empty((engines, room, 3), dtype=np.int64)
        self.fh = np.empty((engines, room, 3), dtype=np.int64)
        self.rs = np.empty((engines, room, 2), dtype=np.int64)
        self.ev_t = np.empty(64 * room, dtype=np.float64)
        self.ev = np.empty((64 * room, 5), dtype=np.int64)
        self.sp = np.empty((room + 1, 3), dtype=np.int64)  # version spans: (version, tokens, next)
        self.drained: dict[int, Callable[[], Any]] = {}  # replica -> what its drain calls
        self.entry: list[Any] | None = None  # the core's one entry on the heap
        # the core's entries still in the heap's queue, the cancelled ones too, by (when,
        # seq): one armed again is revived, never pushed twice (the heap compares an
        # entry's callback where (when, seq) tie)
        self.queued: dict[tuple[float, int], list[Any]] = {}

    def submit(self, engine: int, priority: int, prompt: int, target: int) -> int:
        """A request to replica `engine`, now; returns its index."""
        return self.submit_resumed(engine, priority, prompt, target, 0, ())

    def submit_resumed(self, engine: int, priority: int, prompt: int, target: int,
                       resumed: int, spans: Sequence[Sequence[int]]) -> int:
        """`submit` of a request that goes on from `resumed` tokens (`Request.resume`),
        made in `spans` ([version, tokens] rows); its prefill is then its prompt and those
        tokens, as `SimEngine` prices it."""
        if target <= resumed:
            raise ValueError(f"request {self.n}: nothing left to generate")
        i, st = self.n, self.st
        self.rq = _grown(self.rq, 0, i + 1)
        self.n = i + 1
        first = last = 0  # no span (row 0 is none)
        if spans:
            first, last = self._spans(spans)
        # a request is queued at most once: in flight (waiting or running) bounds the queue
        self.wh = _grown(self.wh, 1, int(st[engine, WSIZE] + st[engine, B]) + 1)
        self.ev_t = _grown(self.ev_t, 0, int(self.g[G_NE]) + 1)
        self.ev = _grown(self.ev, 0, int(self.g[G_NE]) + 1)
        heap = self.heap
        self.g[G_SEQ] = heap._seq  # noqa: SLF001  (the heap's counter, taken and given back)
        control.submit(self.p, self.rq, self.g, st, self.fs, self.wh, self.ev_t, self.ev, i,
                       engine, heap.now, priority, prompt, target, resumed, first, last)
        heap._seq = int(self.g[G_SEQ])  # noqa: SLF001
        self._arm()
        return i

    def _spans(self, spans: Sequence[Sequence[int]]) -> tuple[int, int]:
        """A resumed request's spans as linked rows (copied as they are, as `_Seq` does)."""
        k = int(self.g[G_NSP])
        self.sp = _grown(self.sp, 0, k + len(spans))
        for j, (version, tokens) in enumerate(spans):
            self.sp[k + j] = version, tokens, k + j + 1
        self.sp[k + len(spans) - 1, 2] = 0
        self.g[G_NSP] = k + len(spans)
        return k, k + len(spans) - 1

    def _arm(self) -> None:
        """The core's heap entry at its earliest (when, seq), if that moved."""
        e = next_engine(self.st, self.fs, self.g)
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
            e = core_run(self.p, self.rq, self.g, self.st, self.fs, self.wh, self.fh,
                         self.rs, self.ev_t, self.ev, self.kv, self.max_running,
                         float(limit_t), int(limit_seq))
            heap._seq = int(self.g[G_SEQ])  # noqa: SLF001
            self._returns(start)
            if e == -1:
                break
            if e >= 0:
                self._room(e)
            else:  # a drain is over: told now, at its instant, as `_plan` sets its Wait
                heap.now = float(self.fs[-2 - e, NOW])  # the core runs ahead of the clock
                self.drained.pop(-2 - e)()
        self._arm()

    def _returns(self, start: int) -> None:
        """The returns of the requests ended since event `start`, as heap entries."""
        rows = self.ev[start:int(self.g[G_NE])]
        queue, back = self.heap._queue, self.on_return  # noqa: SLF001
        for k in np.flatnonzero(rows[:, 0] == FINISH).tolist():
            heappush(queue, [float(self.ev_t[start + k]), int(rows[k, 4]), back,
                             (int(rows[k, 1]),)])

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

    # -- a replica's calls (`SimEngine`'s) -----------------------------------
    def _begin(self, e: int) -> int:
        """Room for a call on replica `e` (each request there ends or is requeued at most
        once, and has a span closed), the heap's counter taken; the first event's row."""
        live = int(self.st[e, WSIZE] + self.st[e, B])
        need = int(self.g[G_NE]) + 2 * live + 2
        self.ev_t, self.ev = _grown(self.ev_t, 0, need), _grown(self.ev, 0, need)
        self.sp = _grown(self.sp, 0, int(self.g[G_NSP]) + live + 1)
        self.g[G_SEQ] = self.heap._seq  # noqa: SLF001
        return int(self.g[G_NE])

    def _end(self, start: int) -> None:
        """The counter given back, the returns on the heap, the core's entry moved."""
        self.heap._seq = int(self.g[G_SEQ])  # noqa: SLF001
        self._returns(start)
        self._arm()

    def abort(self, engine: int, ids: Sequence[int]) -> list[int]:
        """`SimEngine.abort`: of `ids` (requests routed to `engine`), those still waiting
        or running end "aborted"; returns them in the order their responses were made."""
        start = self._begin(engine)
        out = control.abort(self.p, self.rq, self.g, self.st, self.fs, self.wh, self.fh,
                            self.rs, self.ev_t, self.ev, engine, self.heap.now,
                            np.asarray(ids, dtype=np.int64))
        self._end(start)
        return out.tolist()

    def pause_now(self, engine: int, mode: str = "keep") -> list[int]:
        """`SimEngine.pause_now`; `mode` "abort" ends every live request (returned in
        that order), "keep" and "drain" keep them (a drain waits first: `drain`)."""
        start = self._begin(engine)
        out = control.pause_now(self.p, self.rq, self.g, self.st, self.fs, self.wh, self.fh,
                                self.rs, self.ev_t, self.ev, engine, self.heap.now,
                                MODES[mode])
        self._end(start)
        return out.tolist()

    def drain(self, engine: int, then: Callable[[], Any]) -> bool:
        """`SimEngine.pause("drain")`'s wait: False when nothing runs (pause it now);
        else the replica admits nothing more, and `then()` is called the moment it has
        emptied (`_plan` sets the drain's Wait then), after which the caller pauses it."""
        st = self.st
        if st[engine, B] == 0:
            return False
        st[engine, PAUSED], st[engine, DRAINING] = DRAIN, 1
        self.drained[engine] = then
        return True

    def resume_now(self, engine: int) -> None:
        """`SimEngine.resume_now`."""
        start = self._begin(engine)
        control.resume_now(self.p, self.g, self.st, self.fs, engine, self.heap.now)
        self._end(start)

    def install_begin(self, engine: int) -> int:
        """`SimEngine.install_begin`: returns the paused state to give `install_end`."""
        start = self._begin(engine)
        was = control.install_begin(self.p, self.rq, self.g, self.st, self.fs, self.fh,
                                    self.ev_t, self.ev, engine, self.heap.now)
        self._end(start)
        return int(was)

    def install_end(self, engine: int, version: int, was_paused: int,
                    recompute: bool = False) -> None:
        """`SimEngine.install_end` (no drafter: speculative decoding stays in Python)."""
        start = self._begin(engine)
        control.install_end(self.p, self.rq, self.g, self.st, self.fs, self.wh, self.fh,
                            self.rs, self.ev_t, self.ev, self.sp, engine, self.heap.now,
                            version, was_paused, recompute)
        self._end(start)

    def version(self, engine: int) -> int:
        return int(self.st[engine, VERSION])

    def outcomes(self, idx: Sequence[int]) -> tuple[np.ndarray, ...]:
        """Ended requests' responses as columns (`control.outcomes`): status (1:
        aborted), tokens, and span rows start[k]:start[k + 1] of (version, tokens)."""
        return OUTCOMES.call(self.rq, self.sp, np.array(idx, dtype=np.int64))

    def outcome(self, i: int) -> tuple[str, int, list[list[int]]]:
        """One ended request's status, tokens and version spans (`Response`'s): what
        `outcomes` gives, read here in Python (a numba call and five arrays cost more
        than one response's few numbers)."""
        row = self.rq[i].tolist()
        gen, at, sp = row[GEN0], row[OPEN_FROM], self.sp
        spans: list[list[int]] = []
        r = row[SPAN_FIRST]
        while r > 0:
            version, tokens, r = sp[r].tolist()
            spans.append([version, tokens])
        if gen > at:  # the open span, as `SimEngine._end` adds it
            if spans and spans[-1][0] == row[OPEN_VERSION]:
                spans[-1][1] += gen - at
            else:
                spans.append([row[OPEN_VERSION], gen - at])
        return ("aborted" if row[STATE] == ABORTED else "finished"), gen, spans

    def events(self) -> Events:
        """The events so far, in the order they were emitted (a preemption's value is
        RECOMPUTE where `install_end` requeued it: not counted as a preemption)."""
        ne = int(self.g[G_NE])
        ev = self.ev[:ne]
        return Events(self.ev_t[:ne].copy(), ev[:, 0].copy(), ev[:, 1].copy(), ev[:, 2].copy(),
                      ev[:, 3].copy(),
                      int(((ev[:, 0] == PREEMPT) & (ev[:, 3] != RECOMPUTE)).sum()))
