"""The engine's pool-wide calls, compiled: abort, pause (keep, abort, drain), resume and a
weight install (begin, end, with recomputation), each request's version spans, and a
request resumed from its partial tokens. The rules are `SimEngine`'s (harness/sim/
engine.py: `abort`, `pause_now`, `resume_now`, `install_begin`, `install_end`,
`_live_seqs`, `_close_span`, `_end`) and `Batching`'s (harness/sim/batching.py: `_cut`,
`_interrupt`, `_requeue`), step for step, on the arrays of harness/sim/fastcore/
timeline.py, whose submission rules are used as they are.

What is kept where (columns past timeline.py's, so its functions read the same arrays):
- per request: the tokens it was resumed from, its open span (version and the token count
  it opened at), its first and last span row, its replica; a request aborted is `ABORTED`
  (finished: timeline's `DONE`);
- per replica: paused (`GOING`, `STOPPED` or `DRAIN`: `SimEngine._paused`'s False, True
  and "drain"), its weight version, and whether a drain waits for the replica to empty;
- spans as rows (version, tokens, next row) linked per request, one table for all; row 0
  is no span, so a request row left zeroed has none.

Three rules are kept in another form than Python's, with the same results:
- `SimEngine._end` adds a request's open span as it ends; here the span is added when the
  response is read (`outcomes`): nothing changes a request after its end.
- `Batching._admit` closes the span of a sequence readmitted under a newer version; here
  `install_end` closes the spans of the waiting sequences as well as the running ones, so
  every live request's open span is always at the replica's version and an admission has
  nothing to close (a waiting sequence makes no tokens between the two moments).
- an aborted waiting request leaves the waiting heap at once, where Python leaves its
  entry for `_admit` to drop: an admission reaches the same answer either way (the early
  refusal and the loop's test are the same inequality), and keys are unique, so the heap's
  pop order is the keys' order whatever rows it holds.
"""

from __future__ import annotations

import numpy as np

from harness.sim.fastcore.jit import njit
from harness.sim.fastcore.stepmodel import steps_time, steps_within
from harness.sim.fastcore.timeline import (
    ADMIT_NO,
    ARRIVAL,
    CTX0,
    CTX_BASE,
    DONE,
    FINISH,
    FSIZE,
    G0,
    G_P,
    G_SEQ,
    GEN0,
    N_ST,
    NONE,
    NOW,
    PENDING,
    PREEMPT,
    PRIO,
    PROMPT,
    RSIZE,
    RUNNING,
    SEG_B,
    SEG_CTX,
    SEG_N,
    SEG_START,
    STATE,
    STEPS,
    TARGET,
    TIMER,
    WAITING,
    WSIZE,
    Arr,
    B,
    _emit,
    _pop,
    _push,
    _requeue,
    _unschedule,
    interrupt,
    submit_to,
)

# request columns past timeline.py's nine
RESUMED, OPEN_VERSION, OPEN_FROM, SPAN_FIRST, SPAN_LAST, REPLICA = range(9, 15)
RQ_COLS = 15
ABORTED = 4  # a request's STATE once aborted (timeline's DONE: finished)
# replica columns past timeline.py's
PAUSED, VERSION, DRAINING = range(N_ST, N_ST + 3)
ST_COLS = N_ST + 3
GOING, STOPPED, DRAIN = 0, 1, 2  # PAUSED: `SimEngine._paused` False, True, "drain"
G_NSP = 2  # the pool's: span rows used (row 0 is none: a zeroed row has none)
G_COLS = G_P + 1  # and timeline.py's (the tree's nodes follow)
RECOMPUTE = 1  # a preemption's value when `install_end` recomputes (else 0)
MODES = {"keep": 0, "abort": 1, "drain": 0}  # `pause_now`'s: a drain is paused as a keep


@njit(cache=True)
def steps_completed(p: Arr, dt: float, b: int, ctx: int, cap: int) -> int:
    """`StepJump.steps_completed`: the most steps (<= cap) that fit entirely within dt."""
    k = steps_within(p, dt, b, ctx, cap)
    if k == 0:
        return 0
    return k if steps_time(p, k, b, ctx) <= dt + 1e-12 else k - 1


@njit(cache=True)
def _end(rq: Arr, g: Arr, st: Arr, fs: Arr, ev_t: Arr, ev: Arr, i: int, state: int) -> None:
    """`SimEngine._end`: detached if running (a waiting one leaves the heap at its
    caller), the event, and the response's return a turn later (the pool's)."""
    if rq[i, STATE] == RUNNING:
        gen = rq[i, GEN0] + (st[STEPS] - rq[i, G0])
        st[B] -= 1
        st[CTX_BASE] -= rq[i, CTX0] - rq[i, G0]
        rq[i, GEN0] = gen
    rq[i, STATE] = state
    g[G_SEQ] += 1
    _emit(g, st, fs, ev_t, ev, FINISH, i, rq[i, GEN0])


@njit(cache=True)
def _cut(p: Arr, rq: Arr, g: Arr, st: Arr, fs: Arr, fh: Arr, ev_t: Arr, ev: Arr) -> None:
    """`Batching._cut`: stop now; only the steps completed by now count, and what they
    finish ends; the segment's timer or the replan is cancelled."""
    if st[PENDING] == TIMER:
        k = steps_completed(p, fs[NOW] - fs[SEG_START], st[SEG_B], st[SEG_CTX], st[SEG_N])
        st[PENDING] = NONE  # (marked for the tree below, once)
        steps = st[STEPS] + k  # `_advance`
        st[STEPS] = steps
        while st[FSIZE] > 0 and fh[0, 0] <= steps:
            i = fh[0, 2]
            st[FSIZE] = _pop(fh, st[FSIZE])
            if rq[i, STATE] == RUNNING and rq[i, G0] + rq[i, TARGET] - rq[i, GEN0] <= steps:
                _end(rq, g, st, fs, ev_t, ev, i, DONE)
    _unschedule(g, st)


@njit(cache=True)
def _by_keys(k0: Arr, k1: Arr) -> Arr:
    """The order of rows by (k0, k1), k1 unique: by k1, then stably by k0."""
    order = np.argsort(k1)
    return order[np.argsort(k0[order], kind="mergesort")]


@njit(cache=True)
def _live(rq: Arr, st: Arr, wh: Arr, rs: Arr, ids: Arr, e: int, every: bool) -> Arr:
    """`SimEngine._live_seqs` of replica e: the running requests in admission order,
    then the waiting ones by (priority, arrival); those of `ids` only unless `every`."""
    run = np.empty(st[B], dtype=np.int64)
    nr = 0
    if every:
        for r in range(st[RSIZE]):  # the run stack is in admission order
            i = rs[r, 0]
            if rq[i, STATE] == RUNNING and rq[i, ADMIT_NO] == rs[r, 1]:
                run[nr] = i
                nr += 1
        wait = wh[:st[WSIZE], 2].copy()
    else:
        wait = np.empty(st[WSIZE], dtype=np.int64)
        nw = 0
        for i in np.unique(ids):
            if rq[i, REPLICA] != e:
                continue
            if rq[i, STATE] == RUNNING:
                run[nr] = i
                nr += 1
            elif rq[i, STATE] == WAITING:
                wait[nw] = i
                nw += 1
        wait = wait[:nw]
        run[:nr] = run[:nr][np.argsort(rq[run[:nr], ADMIT_NO])]
    out = np.empty(nr + wait.shape[0], dtype=np.int64)
    out[:nr] = run[:nr]
    out[nr:] = wait[_by_keys(rq[wait, PRIO], rq[wait, ARRIVAL])]
    return out


@njit(cache=True)
def _end_all(rq: Arr, g: Arr, st: Arr, fs: Arr, wh: Arr, ev_t: Arr, ev: Arr,
             order: Arr) -> None:
    """Each of `order` aborted, in that order; the waiting heap keeps the others."""
    waited = False
    for i in order:
        waited = waited or rq[i, STATE] == WAITING
        _end(rq, g, st, fs, ev_t, ev, i, ABORTED)
    if waited:
        keep = wh[:st[WSIZE]].copy()
        size = 0
        for r in range(keep.shape[0]):
            if rq[keep[r, 2], STATE] == WAITING:
                size = _push(wh, size, keep[r, 0], keep[r, 1], keep[r, 2])
        st[WSIZE] = size


@njit(cache=True)
def abort(p: Arr, rq: Arr, g: Arr, st2: Arr, fs2: Arr, wh3: Arr, fh3: Arr, rs3: Arr,
          ev_t: Arr, ev: Arr, e: int, now: float, ids: Arr) -> Arr:
    """`SimEngine.abort(ids)` on replica e (ids: requests routed there); the aborted in
    the order their responses are made."""
    st, fs, wh = st2[e], fs2[e], wh3[e]
    fs[NOW] = now
    _cut(p, rq, g, st, fs, fh3[e], ev_t, ev)
    order = _live(rq, st, wh, rs3[e], ids, e, False)
    _end_all(rq, g, st, fs, wh, ev_t, ev, order)
    interrupt(p, g, st, fs)
    return order


@njit(cache=True)
def pause_now(p: Arr, rq: Arr, g: Arr, st2: Arr, fs2: Arr, wh3: Arr, fh3: Arr, rs3: Arr,
              ev_t: Arr, ev: Arr, e: int, now: float, ends: int) -> Arr:
    """`SimEngine.pause_now`: cut, paused; `ends` (mode abort): every live request aborted,
    returned in that order."""
    st, fs, wh = st2[e], fs2[e], wh3[e]
    fs[NOW] = now
    _cut(p, rq, g, st, fs, fh3[e], ev_t, ev)
    st[PAUSED] = STOPPED
    if ends == 0:
        return np.empty(0, dtype=np.int64)
    order = _live(rq, st, wh, rs3[e], np.empty(0, dtype=np.int64), e, True)
    _end_all(rq, g, st, fs, wh, ev_t, ev, order)
    st[RSIZE] = 0  # every row of the run stack is of a request ended
    return order


@njit(cache=True)
def resume_now(p: Arr, g: Arr, st2: Arr, fs2: Arr, e: int, now: float) -> None:
    """`SimEngine.resume_now`."""
    st, fs = st2[e], fs2[e]
    fs[NOW] = now
    st[PAUSED] = GOING
    interrupt(p, g, st, fs)


@njit(cache=True)
def install_begin(p: Arr, rq: Arr, g: Arr, st2: Arr, fs2: Arr, fh3: Arr, ev_t: Arr,
                  ev: Arr, e: int, now: float) -> int:
    """`SimEngine.install_begin`: cut and pause; returns the paused state it found."""
    st, fs = st2[e], fs2[e]
    fs[NOW] = now
    _cut(p, rq, g, st, fs, fh3[e], ev_t, ev)
    was = st[PAUSED]
    st[PAUSED] = STOPPED
    return was


@njit(cache=True)
def _add_span(rq: Arr, g: Arr, sp: Arr, i: int, version: int, tokens: int) -> None:
    """`SimEngine._add_span`: merged into the last span of the same version."""
    last = rq[i, SPAN_LAST]
    if last > 0 and sp[last, 0] == version:
        sp[last, 1] += tokens
        return
    k = g[G_NSP]
    g[G_NSP] = k + 1
    sp[k, 0], sp[k, 1], sp[k, 2] = version, tokens, 0
    if last > 0:
        sp[last, 2] = k
    else:
        rq[i, SPAN_FIRST] = k
    rq[i, SPAN_LAST] = k


@njit(cache=True)
def _close_span(rq: Arr, g: Arr, st: Arr, sp: Arr, i: int) -> None:
    """`SimEngine._close_span`: the open span closed at the tokens made so far, a new
    one opened at the replica's version."""
    gen = rq[i, GEN0] + (st[STEPS] - rq[i, G0]) if rq[i, STATE] == RUNNING else rq[i, GEN0]
    if gen > rq[i, OPEN_FROM]:
        _add_span(rq, g, sp, i, rq[i, OPEN_VERSION], gen - rq[i, OPEN_FROM])
    rq[i, OPEN_VERSION] = st[VERSION]
    rq[i, OPEN_FROM] = gen


@njit(cache=True)
def install_end(p: Arr, rq: Arr, g: Arr, st2: Arr, fs2: Arr, wh3: Arr, fh3: Arr, rs3: Arr,
                ev_t: Arr, ev: Arr, sp: Arr, e: int, now: float, version: int, was: int,
                recompute: bool) -> None:
    """`SimEngine.install_end`: cut, the new version, every live span closed (the waiting
    ones too: see the module's docstring); `recompute`: the running requeued newest first,
    each a preemption of value RECOMPUTE (not counted); paused as before; replan."""
    st, fs, wh, rs = st2[e], fs2[e], wh3[e], rs3[e]
    fs[NOW] = now
    _cut(p, rq, g, st, fs, fh3[e], ev_t, ev)
    st[VERSION] = version
    for r in range(st[RSIZE]):
        i = rs[r, 0]
        if rq[i, STATE] == RUNNING and rq[i, ADMIT_NO] == rs[r, 1]:
            _close_span(rq, g, st, sp, i)
    for r in range(st[WSIZE]):
        _close_span(rq, g, st, sp, wh[r, 2])
    if recompute:
        for r in range(st[RSIZE] - 1, -1, -1):
            i = rs[r, 0]
            if rq[i, STATE] == RUNNING and rq[i, ADMIT_NO] == rs[r, 1]:
                _requeue(rq, st, wh, i)
                _emit(g, st, fs, ev_t, ev, PREEMPT, i, RECOMPUTE)
        st[RSIZE] = 0
    st[PAUSED] = was
    interrupt(p, g, st, fs)


@njit(cache=True)
def submit(p: Arr, rq: Arr, g: Arr, st2: Arr, fs2: Arr, wh3: Arr, ev_t: Arr, ev: Arr, i: int,
           e: int, now: float, prio: int, prompt: int, target: int, resumed: int, first: int,
           last: int) -> None:
    """`SimEngine.submit_then`: request i to replica e, resumed from `resumed` tokens
    (its spans so far: rows first..last, 0 for none), its open span at the replica's
    version (see the module's docstring)."""
    rq[i, :] = 0
    rq[i, PRIO], rq[i, PROMPT], rq[i, TARGET] = prio, prompt, target
    rq[i, GEN0] = rq[i, RESUMED] = rq[i, OPEN_FROM] = resumed
    rq[i, OPEN_VERSION] = st2[e, VERSION]
    rq[i, SPAN_FIRST], rq[i, SPAN_LAST], rq[i, REPLICA] = first, last, e
    fs2[e, NOW] = now
    submit_to(p, rq, g, st2[e], fs2[e], wh3[e], ev_t, ev, i)


@njit(cache=True)
def outcomes(rq: Arr, sp: Arr, idx: Arr) -> tuple[Arr, Arr, Arr, Arr, Arr]:
    """Ended requests' responses as columns: status (1 aborted, 0 finished), tokens, and
    their spans, request k's in rows start[k]:start[k + 1] of (version, tokens), the open
    span added as `SimEngine._end` adds it."""
    n = idx.shape[0]
    status = np.empty(n, dtype=np.int64)
    tokens = np.empty(n, dtype=np.int64)
    start = np.zeros(n + 1, dtype=np.int64)
    rows = 0
    for k in range(n):
        r = rq[idx[k], SPAN_FIRST]
        while r > 0:
            rows += 1
            r = sp[r, 2]
        rows += 1
    version = np.empty(rows, dtype=np.int64)
    count = np.empty(rows, dtype=np.int64)
    out = 0
    for k in range(n):
        i = idx[k]
        status[k] = 1 if rq[i, STATE] == ABORTED else 0
        gen = rq[i, GEN0]
        tokens[k] = gen
        r = rq[i, SPAN_FIRST]
        while r > 0:
            version[out], count[out] = sp[r, 0], sp[r, 1]
            out += 1
            r = sp[r, 2]
        if gen > rq[i, OPEN_FROM]:
            more = gen - rq[i, OPEN_FROM]
            if out > start[k] and version[out - 1] == rq[i, OPEN_VERSION]:
                count[out - 1] += more
            else:
                version[out], count[out] = rq[i, OPEN_VERSION], more
                out += 1
        start[k + 1] = out
    return status, tokens, start, version[:out], count[:out]
