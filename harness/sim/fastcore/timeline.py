"""`Batching`'s timeline (harness/sim/batching.py) and `SimEngine`'s per-request bookkeeping
(harness/sim/engine.py), compiled, for the plain case: submissions only (no abort, pause,
install, chunk, resume, lend or speculative decoding; the GPU share's turns in `_plan`), the
roofline or the measured-kernel table pricing the steps (harness/sim/fastcore/stepmodel.py).

Each rule is the Python one, step for step, so that every event comes at the same time,
bit for bit: admission by (priority, arrival) while the KV cache and the batch cap allow,
with the early refusal when the first in line does not fit; preemption of the newest
running sequence while the next step would overflow; segments of n steps up to the next
finish or the step at which the cache would fill; a submission cuts the segment at the
step then running (`_cut_at_boundary`, said once per instant and segment); the finish heap
keeps stale entries of preempted sequences and checks each as it comes up.

`run_engines`: engines do not interact, so each runs its own timeline over its own
submissions, one after another, in the heap's order: every submission is scheduled before
the run starts, so at equal times it comes before the engine's own timer or replan (a
larger `seq`; an engine has at most one). harness/sim/fastcore/stepped.py steps the same
rules (`submit_to`, `fire`) on the heap itself, with the seqs the heap's counter gives.

State lives in arrays: per request `rq[i, column]`, per engine the scalars `st` and `fs`,
and three binary heaps of rows (key0, key1, payload) with unique keys, so the pop order is
the keys' order whatever the heap's layout (as heapq's on Python tuples).
"""

from __future__ import annotations

import numpy as np

from harness.sim.fastcore.jit import njit
from harness.sim.fastcore.stepmodel import prefill_time, steps_time, steps_within

Arr = np.ndarray

# event kinds (harness/sim/fastcore/__init__.py: KINDS)
SUBMIT, ADMIT, PREEMPT, FINISH = 0, 1, 2, 3
# request columns
PRIO, PROMPT, TARGET, STATE, GEN0, CTX0, G0, ADMIT_NO, ARRIVAL = range(9)
WAITING, RUNNING, DONE = 1, 2, 3
# engine scalars (st)
STEPS, CTX_BASE, B, ARRIVALS, ADMITS, WSIZE, FSIZE, RSIZE = range(8)
SEG_N, SEG_B, SEG_CTX, SEG_ID, CUT_ID, PENDING, PEND_SEQ, ENGINE, IDS = range(8, 17)
N_ST = 17
# the pool's (g): the heap's seq counter as the engines take from it, events written;
# (control.py's G_NSP is 2) the GPU share: who holds the GPUs, and the call `_plan` left
# for Python (`GpuShare.engine_wants` or `engine_idle`) and the replica that made it
G_SEQ, G_NE, G_SHARE, G_CALL, G_CALLER = 0, 1, 3, 4, 5
# 1: no admission is written to `ev` (the pool's trace keeps none: a memory-only run's), so
# Python is handed only events it acts on or keeps
G_QUIET = 6
# the replicas' next entries as a tree (next_entry.py `next_engine`), where g holds one: the
# replicas set since it was last read (their count; a stack of at most G_CAP from g[G_AT]),
# then its 2 x G_P nodes (each the replica whose entry comes first below it, -1: none)
G_ND, G_AT, G_CAP, G_P = 7, 8, 9, 10
NO_SHARE, ENGINE_HOLDS, TRAINER_HOLDS = 0, 1, 2  # G_SHARE ("switching": the trainer's)
WANTS, IDLE = 1, 2  # G_CALL (0: none)
# engine floats (fs); the last two since last read (harness/sim/replica_windows.py)
NOW, SEG_START, PEND_T, CUT_NOW, FIRST_ADMIT, LAST_FINISH = range(6)
N_FS = 6
# what the engine's one heap entry is
NONE, TIMER, REPLAN = 0, 1, 2


@njit(cache=True)
def _push(h: Arr, size: int, k0: int, k1: int, v: int) -> int:
    pos = size
    while pos > 0:
        up = (pos - 1) >> 1
        if h[up, 0] < k0 or (h[up, 0] == k0 and h[up, 1] < k1):
            break
        h[pos, 0], h[pos, 1], h[pos, 2] = h[up, 0], h[up, 1], h[up, 2]
        pos = up
    h[pos, 0], h[pos, 1], h[pos, 2] = k0, k1, v
    return size + 1


@njit(cache=True)
def _pop(h: Arr, size: int) -> int:
    """Drop the smallest row; returns the new size."""
    size -= 1
    if size == 0:
        return 0
    k0, k1, v = h[size, 0], h[size, 1], h[size, 2]
    pos = 0
    while True:
        child = 2 * pos + 1
        if child >= size:
            break
        right = child + 1
        if right < size and (h[right, 0] < h[child, 0]
                             or (h[right, 0] == h[child, 0] and h[right, 1] < h[child, 1])):
            child = right
        if k0 < h[child, 0] or (k0 == h[child, 0] and k1 < h[child, 1]):
            break
        h[pos, 0], h[pos, 1], h[pos, 2] = h[child, 0], h[child, 1], h[child, 2]
        pos = child
    h[pos, 0], h[pos, 1], h[pos, 2] = k0, k1, v
    return size


@njit(cache=True)
def _emit(g: Arr, st: Arr, fs: Arr, ev_t: Arr, ev: Arr, kind: int, i: int, value: int) -> None:
    if kind == ADMIT:
        fs[FIRST_ADMIT] = min(fs[FIRST_ADMIT], fs[NOW])
        if g[G_QUIET]:
            return
    elif kind == FINISH:
        fs[LAST_FINISH] = max(fs[LAST_FINISH], fs[NOW])
    ne = g[G_NE]
    ev_t[ne] = fs[NOW]
    ev[ne, 0], ev[ne, 1], ev[ne, 2], ev[ne, 3] = kind, i, st[ENGINE], value
    ev[ne, 4] = g[G_SEQ]  # a finish's: the seq of its return a turn later (the pool's)
    g[G_NE] = ne + 1


@njit(cache=True)
def _dirty(g: Arr, e: int) -> None:
    """Replica `e`'s entry was set: the tree's path from it is redone when next read."""
    if g.shape[0] <= G_P:  # a g with no tree (`simulate`'s)
        return
    n = g[G_ND]
    if n < g[G_CAP]:
        g[g[G_AT] + n] = e
    g[G_ND] = n + 1


@njit(cache=True)
def _unschedule(g: Arr, st: Arr) -> None:
    """The engine's heap entry dropped (none pending): with `_schedule`, the only places
    an entry is set, so the tree of next entries is told of each."""
    st[PENDING] = NONE
    _dirty(g, st[ENGINE])


@njit(cache=True)
def _schedule(g: Arr, st: Arr, fs: Arr, kind: int, when: float) -> None:
    """The engine's one heap entry (`call_at`, `call_soon`): a new seq from the heap's
    counter, and `when` never before now."""
    g[G_SEQ] += 1
    st[PEND_SEQ] = g[G_SEQ]
    st[PENDING] = kind
    fs[PEND_T] = when if when > fs[NOW] else fs[NOW]
    _dirty(g, st[ENGINE])


@njit(cache=True)
def _requeue(rq: Arr, st: Arr, wh: Arr, i: int) -> None:
    """`Batching._requeue`: back to the queue, tokens kept, cache freed."""
    st[B] -= 1
    st[CTX_BASE] -= rq[i, CTX0] - rq[i, G0]
    rq[i, GEN0] += st[STEPS] - rq[i, G0]
    rq[i, STATE] = WAITING
    st[WSIZE] = _push(wh, st[WSIZE], rq[i, PRIO], rq[i, ARRIVAL], i)


@njit(cache=True)
def _preempt(rq: Arr, g: Arr, st: Arr, fs: Arr, wh: Arr, rs: Arr, ev_t: Arr, ev: Arr) -> None:
    """`Batching._preempt`: the newest running sequence (the run stack's top, once the
    entries of sequences that ended or were requeued since are dropped)."""
    top = st[RSIZE] - 1
    while not (rq[rs[top, 0], STATE] == RUNNING and rq[rs[top, 0], ADMIT_NO] == rs[top, 1]):
        top -= 1
    i = rs[top, 0]
    st[RSIZE] = top
    _requeue(rq, st, wh, i)
    _emit(g, st, fs, ev_t, ev, PREEMPT, i, 0)


@njit(cache=True)
def _admit(p: Arr, rq: Arr, g: Arr, st: Arr, fs: Arr, wh: Arr, fh: Arr, rs: Arr, ev_t: Arr,
           ev: Arr, capacity: int, max_running: int) -> float:
    """`Batching._admit`: admit waiting sequences that fit; the prefill time they cost."""
    steps = st[STEPS]
    base = st[CTX_BASE]
    ctx = base + st[B] * steps
    if st[WSIZE] == 0:
        return 0.0
    if st[B] > 0:
        if ctx + 1 > capacity or st[B] >= max_running:
            return 0.0
        head = wh[0, 2]
        if ctx + rq[head, PROMPT] + rq[head, GEN0] >= capacity:
            return 0.0
    tokens = squares = admitted = 0
    while st[WSIZE] > 0 and st[B] < max_running:
        i = wh[0, 2]
        need = rq[i, PROMPT] + rq[i, GEN0]
        if ctx + need + 1 > capacity and st[B] > 0:
            break
        st[WSIZE] = _pop(wh, st[WSIZE])
        rq[i, STATE] = RUNNING
        rq[i, CTX0] = need
        rq[i, G0] = steps
        admit_no = st[ADMITS]
        st[ADMITS] = admit_no + 1
        rq[i, ADMIT_NO] = admit_no
        r = st[RSIZE]
        rs[r, 0], rs[r, 1] = i, admit_no
        st[RSIZE] = r + 1
        st[B] += 1
        base += need - steps
        ctx += need
        tokens += need
        squares += need * need
        admitted += 1
        st[FSIZE] = _push(fh, st[FSIZE], steps + rq[i, TARGET] - rq[i, GEN0], admit_no, i)
        _emit(g, st, fs, ev_t, ev, ADMIT, i, 0)
    if admitted == 0:
        return 0.0
    st[CTX_BASE] = base
    return prefill_time(p, tokens, squares, admitted)


@njit(cache=True)
def _plan(p: Arr, rq: Arr, g: Arr, st: Arr, fs: Arr, wh: Arr, fh: Arr, rs: Arr, ev_t: Arr, ev: Arr,
          capacity: int, max_running: int) -> None:
    """`Batching._plan`: admit, preempt while the next step would overflow, and set the
    next segment's timer (none for an empty engine). With a GPU share (G_SHARE) nothing is
    planned while the trainer holds the GPUs, and the share's call is left for Python where
    `Batching._plan` makes it (fastcore/share.py): the core stops after this entry."""
    share = g[G_SHARE]
    if share == TRAINER_HOLDS:
        if st[B] > 0 or st[WSIZE] > 0:
            g[G_CALL], g[G_CALLER] = WANTS, st[ENGINE]
        return
    prefill = 0.0
    if st[WSIZE] > 0:
        prefill = _admit(p, rq, g, st, fs, wh, fh, rs, ev_t, ev, capacity, max_running)
    b = st[B]
    if b == 0:
        if share != NO_SHARE and st[WSIZE] == 0:
            g[G_CALL], g[G_CALLER] = IDLE, st[ENGINE]
        return
    steps = st[STEPS]
    ctx = st[CTX_BASE] + b * steps
    while ctx + b > capacity and b > 1:
        _preempt(rq, g, st, fs, wh, rs, ev_t, ev)
        b = st[B]
        ctx = st[CTX_BASE] + b * steps
    while True:  # drop entries of sequences that left or were readmitted since
        due, head = fh[0, 0], fh[0, 2]
        if rq[head, STATE] == RUNNING and due == rq[head, G0] + rq[head, TARGET] - rq[head, GEN0]:
            break
        st[FSIZE] = _pop(fh, st[FSIZE])
    n = due - steps
    room = (capacity - ctx) // b
    if room < n:
        n = room
    if n < 1:
        n = 1
    now = fs[NOW]
    start = now + prefill
    fs[SEG_START] = start
    st[SEG_N], st[SEG_B], st[SEG_CTX] = n, b, ctx
    st[IDS] += 1
    st[SEG_ID] = st[IDS]
    _schedule(g, st, fs, TIMER, start + steps_time(p, n, b, ctx))


@njit(cache=True)
def _segment_end(p: Arr, rq: Arr, g: Arr, st: Arr, fs: Arr, wh: Arr, fh: Arr, rs: Arr, ev_t: Arr,
                 ev: Arr, capacity: int, max_running: int) -> None:
    """`Batching._on_segment_end`: the steps are done; end what is due, plan again."""
    steps = st[STEPS] + st[SEG_N]
    st[STEPS] = steps
    _unschedule(g, st)
    while st[FSIZE] > 0 and fh[0, 0] <= steps:
        i = fh[0, 2]
        st[FSIZE] = _pop(fh, st[FSIZE])
        if rq[i, STATE] == RUNNING and rq[i, G0] + rq[i, TARGET] - rq[i, GEN0] <= steps:
            gen = rq[i, GEN0] + (steps - rq[i, G0])  # `SimEngine._end`, finished
            st[B] -= 1
            st[CTX_BASE] -= rq[i, CTX0] - rq[i, G0]
            rq[i, GEN0] = gen
            rq[i, STATE] = DONE
            g[G_SEQ] += 1  # the response's return, a turn later (`EnginePool._soon`)
            _emit(g, st, fs, ev_t, ev, FINISH, i, gen)
    if st[B] > 0 or st[WSIZE] > 0 or g[G_SHARE] != NO_SHARE:
        _plan(p, rq, g, st, fs, wh, fh, rs, ev_t, ev, capacity, max_running)


@njit(cache=True)
def submit_to(p: Arr, rq: Arr, g: Arr, st: Arr, fs: Arr, wh: Arr, ev_t: Arr, ev: Arr,
              i: int) -> None:
    """`SimEngine.submit_then` and `Batching._cut_at_boundary`."""
    _emit(g, st, fs, ev_t, ev, SUBMIT, i, rq[i, PROMPT])
    rq[i, ARRIVAL] = st[ARRIVALS]
    st[ARRIVALS] += 1
    rq[i, STATE] = WAITING
    st[WSIZE] = _push(wh, st[WSIZE], rq[i, PRIO], rq[i, ARRIVAL], i)
    interrupt(p, g, st, fs)


@njit(cache=True)
def interrupt(p: Arr, g: Arr, st: Arr, fs: Arr) -> None:
    """`Batching._interrupt`: a running segment cut at the step under way (once an instant
    and segment), else a replan now unless due; a submission and control.py's calls end so."""
    now = fs[NOW]
    if st[PENDING] == TIMER:
        if st[SEG_ID] == st[CUT_ID] and now == fs[CUT_NOW]:
            return
        start, n = fs[SEG_START], st[SEG_N]
        k = steps_within(p, now - start, st[SEG_B], st[SEG_CTX], n)
        fs[CUT_NOW] = now
        if k < n:
            st[SEG_N] = k
            st[IDS] += 1
            st[SEG_ID] = st[IDS]
            _schedule(g, st, fs, TIMER, start + steps_time(p, k, st[SEG_B], st[SEG_CTX]))
        st[CUT_ID] = st[SEG_ID]
    elif st[PENDING] == NONE:
        _schedule(g, st, fs, REPLAN, now)


@njit(cache=True)
def _grow(a: Arr, need: int) -> np.ndarray:
    if a.shape[0] >= need:
        return a
    out = np.empty((max(need, 2 * a.shape[0]),) + a.shape[1:], dtype=a.dtype)
    out[:a.shape[0]] = a
    return out


@njit(cache=True)
def run_engines(p: Arr, capacity: int, max_running: int, submit_t: Arr, rq: Arr, order: Arr,
                bounds: Arr) -> tuple[np.ndarray, np.ndarray, int]:
    """Every engine's timeline, one engine after another. `order`: request indices by
    (engine, submit time, index); engine e's are `order[bounds[e]:bounds[e + 1]]`. `rq`: per
    request (PRIO, PROMPT, TARGET set; the rest is written). Returns the events' times and
    rows (kind, request, engine, value, seq), each engine's in its Python twin's order
    (value: prompt tokens at a submit, response tokens at a finish, else 0), and the
    preemptions."""
    n_req = submit_t.shape[0]
    ev_t = np.empty(3 * n_req + 16, dtype=np.float64)
    ev = np.empty((3 * n_req + 16, 5), dtype=np.int64)
    most = 1
    for e in range(bounds.shape[0] - 1):
        most = max(most, bounds[e + 1] - bounds[e])
    wh = np.empty((most, 3), dtype=np.int64)
    fh = np.empty((most + 16, 3), dtype=np.int64)
    rs = np.empty((most + 16, 2), dtype=np.int64)
    st = np.zeros(N_ST, dtype=np.int64)
    fs = np.zeros(N_FS, dtype=np.float64)
    g = np.zeros(G_QUIET + 1, dtype=np.int64)  # (G_QUIET 0: every event written)
    for e in range(bounds.shape[0] - 1):
        lo, hi = bounds[e], bounds[e + 1]
        count = hi - lo
        st[:] = 0
        st[ENGINE], st[CUT_ID] = e, -1
        fs[:] = 0.0
        fs[CUT_NOW], fs[FIRST_ADMIT], fs[LAST_FINISH] = -1.0, np.inf, -np.inf
        nxt = lo
        while True:
            # room for a turn's additions: 3 events, a finish entry and a run-stack row each
            ev_t = _grow(ev_t, g[G_NE] + 3 * count + 2)
            ev = _grow(ev, g[G_NE] + 3 * count + 2)
            fh = _grow(fh, st[FSIZE] + count + 1)
            if st[RSIZE] + count + 1 > rs.shape[0]:
                st[RSIZE] = compact(rq, rs, st[RSIZE])
                rs = _grow(rs, st[RSIZE] + count + 1)
            pending = st[PENDING]
            if nxt < hi and (pending == NONE or submit_t[order[nxt]] <= fs[PEND_T]):
                i = order[nxt]
                nxt += 1
                fs[NOW] = submit_t[i]
                submit_to(p, rq, g, st, fs, wh, ev_t, ev, i)
            elif pending != NONE:
                fire(p, rq, g, st, fs, wh, fh, rs, ev_t, ev, capacity, max_running)
            else:
                break
    ne = g[G_NE]
    preemptions = 0
    for k in range(ne):
        if ev[k, 0] == PREEMPT:
            preemptions += 1
    return ev_t[:ne], ev[:ne], preemptions


@njit(cache=True)
def fire(p: Arr, rq: Arr, g: Arr, st: Arr, fs: Arr, wh: Arr, fh: Arr, rs: Arr, ev_t: Arr, ev: Arr,
          capacity: int, max_running: int) -> None:
    """The engine's heap entry comes up: its segment ends, or it replans."""
    fs[NOW] = fs[PEND_T]
    if st[PENDING] == TIMER:
        _segment_end(p, rq, g, st, fs, wh, fh, rs, ev_t, ev, capacity, max_running)
    else:
        _unschedule(g, st)
        _plan(p, rq, g, st, fs, wh, fh, rs, ev_t, ev, capacity, max_running)


@njit(cache=True)
def compact(rq: Arr, rs: Arr, size: int) -> int:
    """Drop the run stack's rows of sequences no longer running as admitted (their order,
    the admission order, is kept)."""
    out = 0
    for r in range(size):
        i = rs[r, 0]
        if rq[i, STATE] == RUNNING and rq[i, ADMIT_NO] == rs[r, 1]:
            rs[out, 0], rs[out, 1] = i, rs[r, 1]
            out += 1
    return out
