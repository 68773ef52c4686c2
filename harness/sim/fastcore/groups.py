"""A served group's returns and checks as the core's own entries (harness/sim/fastcore/
pool.py's `serve_group`): Python is called at the group's K-th response and K-th score
only, not at each sample's return and check.

A request's return is a turn after its finish, keyed by the finish's (when, seq taken
then); the core makes its FINISH rows in (when, seq) order, so a group's K-th FINISH row
is its K-th return. The other K-1 returns go into a timer heap of the core's (rows of
(when; seq, kind, request)); when one comes up it takes its check's seq from the heap's
counter, as `call_later` would in `serve`, and its check goes into the same heap at the
end of the sample's check latency (drawn as `_Check` draws it: a column). The K-th return
stays a Python entry (`serve`'s `_answered`: `group_complete`, `on_complete`), whose check
Python puts into the core's timer heap (`add_check`). The group's last check stops the
core (`SCORED`): Python then reads the rewards (`check_outcome` on each response, as
`_Check` does) and starts the control node's time per group, taking its seq then.
A group served with no checks (`serve(score=False)`: verl's rollout, whose reward stage
comes after the whole rollout) has each request's latency `NO_CHECK`: its returns take no
seq and start nothing, as `_answered` does for it, and its K-th return ends it.

The core's entry on the heap is at the earliest of its replicas' next entry and the timer
heap's head; `core_run` runs the replicas up to the earlier of the heap's next entry and
the timer head (it stops itself at the first return it makes). Each return the core
takes is handed to Python as a RETURNED row (its replica given back to the router before
any Python runs: the core never runs past the heap's next entry), but a quiet group's
(harness/sim/fastcore/served.py): it makes no such row (and, QUIET_ALL, no HELD finish
either), and marks each such request in `back` instead. A silent group's (QUIET_SILENT)
K-th finish is held as the others are: the core takes its return and starts its check,
and Python hears of the group at its last check alone (served.py's `_scored`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from harness.sim.fastcore.crossing import LeanEngines
from harness.sim.fastcore.jit import Direct, njit
from harness.sim.fastcore.next_entry import before, next_engine
from harness.sim.fastcore.stepped import _grown, core_run
from harness.sim.fastcore.timeline import (
    ENGINE_HOLDS,
    FINISH,
    G_CALL,
    G_CALLER,
    G_NE,
    G_SEQ,
    G_SHARE,
    NOW,
    PEND_SEQ,
    PEND_T,
    TRAINER_HOLDS,
    Arr,
)

HELD, RETURNED = 10, 11  # event rows: a finish whose return the core takes; that return
RET, CHK = 0, 1  # timer kinds
# `group_run`'s first answer besides GO (done) and e >= 0 (replica e needs room); far from
# `core_run`'s drain answers (-2 - e), which the compiled pool never makes (no drain)
GO, SCORED, ROOM_EV, SHARED = -1, -(1 << 40), -(1 << 40) - 1, -(1 << 40) - 2
# a group row: its counts, its first request, and whether Python hears of its returns
UNSCORED, UNRETURNED, SIZE, FIRST, QUIET = 0, 1, 2, 3, 4
HELD_QUIET, RETURNED_QUIET = 1, 2  # a quiet group's request (`back`): held, its return taken
# a group's QUIET: Python hears of every row (0), of neither its held finishes nor the
# returns the core takes (QUIET_ALL), of its held finishes only (QUIET_RETURNS), or, as
# QUIET_ALL, and of its K-th return neither: that one the core's too (QUIET_SILENT)
QUIET_ALL, QUIET_RETURNS, QUIET_SILENT = 1, 2, 3
NO_CHECK = -1.0  # a request's latency where its group is served unchecked (`score=False`)


@njit(cache=True)
def t_push(tt: Arr, tq: Arr, tn: Arr, t: float, seq: int, kind: int, i: int) -> None:
    """A timer row into the heap (the caller made room)."""
    k = tn[0]
    tn[0] = k + 1
    while k > 0:
        up = (k - 1) // 2
        if not before(t, seq, tt[up], tq[up, 0]):
            break
        tt[k] = tt[up]
        tq[k, 0], tq[k, 1], tq[k, 2] = tq[up, 0], tq[up, 1], tq[up, 2]
        k = up
    tt[k] = t
    tq[k, 0], tq[k, 1], tq[k, 2] = seq, kind, i


@njit(cache=True)
def _t_pop(tt: Arr, tq: Arr, tn: Arr) -> None:
    """The head out of the heap."""
    n = tn[0] - 1
    tn[0] = n
    t, seq = tt[n], tq[n, 0]
    k = 0
    while True:
        c = 2 * k + 1
        if c >= n:
            break
        if c + 1 < n and before(tt[c + 1], tq[c + 1, 0], tt[c], tq[c, 0]):
            c += 1
        if not before(tt[c], tq[c, 0], t, seq):
            break
        tt[k] = tt[c]
        tq[k, 0], tq[k, 1], tq[k, 2] = tq[c, 0], tq[c, 1], tq[c, 2]
        k = c
    if n > 0:
        tt[k] = tt[n]
        tq[k, 0], tq[k, 1], tq[k, 2] = tq[n, 0], tq[n, 1], tq[n, 2]


@njit(cache=True)
def group_next(st: Arr, fs: Arr, tt: Arr, tq: Arr, tn: Arr, g: Arr) -> tuple[int, float, int]:
    """The core's next entry: (>= 0, when, seq), or (-1, 0, 0) when it has none."""
    b = next_engine(st, fs, g)
    if tn[0] > 0 and (b < 0 or before(tt[0], tq[0, 0], fs[b, PEND_T], st[b, PEND_SEQ])):
        return 0, tt[0], tq[0, 0]
    if b < 0:
        return -1, 0.0, 0
    return b, fs[b, PEND_T], st[b, PEND_SEQ]


@njit(cache=True)
def add_check(tt: Arr, tq: Arr, tn: Arr, st: Arr, fs: Arr, t: float, seq: int,
              i: int, g: Arr) -> tuple[int, float, int]:
    """Request `i`'s check ends at (t, seq) (the K-th return's, set by Python); returns
    `group_next`."""
    t_push(tt, tq, tn, t, seq, CHK, i)
    return group_next(st, fs, tt, tq, tn, g)


@njit(cache=True)
def group_run(p: Arr, rq: Arr, g: Arr, st: Arr, fs: Arr, wh: Arr, fh: Arr, rs: Arr,
              ev_t: Arr, ev: Arr, capacity: int, max_running: int, limit_t: float,
              limit_seq: int, seq: int, slot: Arr, latency: Arr, counts: Arr, tt: Arr,
              tq: Arr, tn: Arr, back: Arr) -> tuple[int, int, int, float, int, int]:
    """The replicas and the timers in (when, seq) order while they come before the heap's
    next entry and the first return left to Python. Returns (e, i, b, when, seq, counter):
    e GO (done), SCORED (request i's check was its group's last: tell Python now, at the
    timer's when), SHARED (i: the call a replica's `_plan` left for the GPU share, made
    at when), ROOM_EV (the event rows need room) or a replica that needs room; then
    `group_next`'s three and the heap's counter. A quiet group's held finishes and the
    returns the core takes make no row (`back` marks each request instead): the rows
    after them move up."""
    g[G_SEQ] = seq
    while True:
        call = g[G_CALL]
        if call != 0:  # a replica's `_plan` left a call for the GPU share: Python's now
            g[G_CALL] = 0
            b, t, s = group_next(st, fs, tt, tq, tn, g)
            return SHARED, call, b, fs[g[G_CALLER], NOW], s, g[G_SEQ]
        lt, ls = limit_t, limit_seq
        if tn[0] > 0 and before(tt[0], tq[0, 0], lt, ls):
            lt, ls = tt[0], tq[0, 0]
        ne0 = g[G_NE]
        e = core_run(p, rq, g, st, fs, wh, fh, rs, ev_t, ev, capacity, max_running, lt, ls)
        w = ne0  # where the next row kept goes
        for k in range(ne0, g[G_NE]):
            if ev[k, 0] == FINISH:
                i = ev[k, 1]
                gs = slot[i]
                held = False
                if gs >= 0:
                    counts[gs, UNRETURNED] -= 1
                    held = (counts[gs, UNRETURNED] > 0  # not the K-th: the core's return
                            or counts[gs, QUIET] == QUIET_SILENT)
                if held:
                    t_push(tt, tq, tn, ev_t[k], ev[k, 4], RET, i)
                    if counts[gs, QUIET] == QUIET_ALL or counts[gs, QUIET] == QUIET_SILENT:
                        back[i] = HELD_QUIET
                        continue
                    ev[k, 0] = HELD
                elif before(ev_t[k], ev[k, 4], limit_t, limit_seq):  # Python's return
                    limit_t, limit_seq = ev_t[k], ev[k, 4]
            if w != k:
                ev_t[w] = ev_t[k]
                for c in range(5):
                    ev[w, c] = ev[k, c]
            w += 1
        g[G_NE] = w
        if e != -1:
            b, t, s = group_next(st, fs, tt, tq, tn, g)
            return e, 0, b, t, s, g[G_SEQ]
        if g[G_CALL] != 0:  # `core_run` stopped for it: told before any timer
            continue
        b = next_engine(st, fs, g)
        if tn[0] == 0 or not before(tt[0], tq[0, 0], limit_t, limit_seq) or (
                b >= 0 and before(fs[b, PEND_T], st[b, PEND_SEQ], tt[0], tq[0, 0])):
            break
        if g[G_NE] + 1 > ev_t.shape[0]:
            b, t, s = group_next(st, fs, tt, tq, tn, g)
            return ROOM_EV, 0, b, t, s, g[G_SEQ]
        t0, s0, kind, i = tt[0], tq[0, 0], tq[0, 1], tq[0, 2]
        _t_pop(tt, tq, tn)
        if kind == RET:  # its replica back to the router; its check starts
            if counts[slot[i], QUIET]:  # Python need not hear of it (either quiet)
                back[i] = RETURNED_QUIET
            else:
                ne = g[G_NE]
                ev_t[ne] = t0
                ev[ne, 0], ev[ne, 1], ev[ne, 2], ev[ne, 3], ev[ne, 4] = RETURNED, i, 0, 0, s0
                g[G_NE] = ne + 1
            d = latency[i]
            if d < 0:  # a group served unchecked (NO_CHECK): no check, no seq taken
                continue
            g[G_SEQ] += 1
            t_push(tt, tq, tn, t0 + d if d > 0 else t0, g[G_SEQ], CHK, i)
            continue
        gs = slot[i]
        counts[gs, UNSCORED] -= 1
        if counts[gs, UNSCORED] == 0:
            b, t, s = group_next(st, fs, tt, tq, tn, g)
            return SCORED, i, b, t0, s, g[G_SEQ]
    b, t, s = group_next(st, fs, tt, tq, tn, g)
    return GO, 0, b, t, s, g[G_SEQ]


# called through their entry points (harness/sim/fastcore/jit.py's `Direct`: the core's
# own arrays, the scalars cast where they could be of another type)
GROUP_RUN, GROUP_NEXT, ADD_CHECK = Direct(group_run), Direct(group_next), Direct(add_check)


class GroupEngines(LeanEngines):
    """`LeanEngines` that also run the returns and checks of served groups (`group`)."""

    scored: Callable[[int, float], None]  # request i's check was its group's last, at t
    # a GPU share (harness/sim/fastcore/share.py): whether the engine holds the GPUs, read
    # at each turn of the core (only Python's entries change it); the call `_plan` left
    holds: Callable[[], bool] | None = None
    told: Callable[[int, float], None]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.slot = np.full(64, -1, dtype=np.int64)  # per request: its group's row, or -1
        self.latency = np.zeros(64, dtype=np.float64)  # per request: its check's latency
        self.back = np.zeros(64, dtype=np.int64)  # per request: HELD_QUIET, RETURNED_QUIET
        # per group: unscored, unreturned, K, first, quiet
        self.counts = np.zeros((16, 5), dtype=np.int64)
        self.groups = 0
        self.tt = np.empty(64, dtype=np.float64)
        self.tq = np.empty((64, 3), dtype=np.int64)
        self.tn = np.zeros(1, dtype=np.int64)
        self.unscored = 0  # requests of groups not yet scored: the timers' bound

    def _cover(self, n: int) -> None:
        """Request columns for `n` requests (a request of no group: slot -1)."""
        if n > self.slot.shape[0]:
            grown = max(n, 2 * self.slot.shape[0])
            slot = np.full(grown, -1, dtype=np.int64)
            slot[:self.slot.shape[0]] = self.slot
            back = np.zeros(grown, dtype=np.int64)
            back[:self.back.shape[0]] = self.back
            self.slot, self.latency = slot, _grown(self.latency, 0, grown)
            self.back = back

    def submit(self, engine: int, priority: int, prompt: int, target: int) -> int:
        self._cover(self.n + 1)
        return super().submit(engine, priority, prompt, target)

    def submit_resumed(self, engine: int, priority: int, prompt: int, target: int,
                       resumed: int, spans: Sequence[Sequence[int]]) -> int:
        self._cover(self.n + 1)  # a request of no served group
        return super().submit_resumed(engine, priority, prompt, target, resumed, spans)

    def submit_many(self, engine: list[int], priority: list[int], prompt: list[int],
                    target: list[int]) -> int:
        self._cover(self.n + len(engine))
        return super().submit_many(engine, priority, prompt, target)

    def group(self, latencies: list[float], quiet: int = 0) -> int:
        """The next K requests submitted are one group's, with these check latencies;
        returns the group's row. `quiet` QUIET_ALL: Python is not told of its held
        finishes and the returns the core takes (no rows), only of its K-th finish;
        QUIET_RETURNS: not of the returns the core takes."""
        k, i, gs = len(latencies), self.n, self.groups
        self._cover(i + k)
        self.slot[i:i + k] = gs
        self.latency[i:i + k] = latencies
        self.counts = _grown(self.counts, 0, gs + 1)
        self.counts[gs] = k, k, k, i, quiet
        self.groups = gs + 1
        self.unscored += k
        if self.unscored > self.tt.shape[0]:  # a request has one timer at a time at most
            self.tt, self.tq = _grown(self.tt, 0, self.unscored), _grown(self.tq, 0, self.unscored)
        return gs

    def add_check(self, i: int, t: float, seq: int) -> None:
        b, t, s = ADD_CHECK.call(self.tt, self.tq, self.tn, self.st, self.fs, float(t),
                                 int(seq), int(i), self.g)
        self._arm_at(b, t, s)

    def _arm(self) -> None:
        b, t, s = GROUP_NEXT.call(self.st, self.fs, self.tt, self.tq, self.tn, self.g)
        self._arm_at(int(b), float(t), int(s))

    def _fire(self, key: tuple[float, int]) -> None:
        if not self.groups and self.holds is None:  # no served group yet and no GPU
            LeanEngines._fire(self, key)  # share: no timers, no share calls, and
            return  # `lean_run` takes fewer arrays
        del self.queued[key]
        self.entry = None
        if self.holds is not None:
            self.g[G_SHARE] = ENGINE_HOLDS if self.holds() else TRAINER_HOLDS
        heap = self.heap
        queue: list[Any] = heap._queue  # noqa: SLF001
        while True:
            limit_t, limit_seq = ((float(queue[0][0]), queue[0][1]) if queue
                                  else (np.inf, 1 << 62))
            e, i, b, t, s, seq = GROUP_RUN.call(
                self.p, self.rq, self.g, self.st, self.fs, self.wh, self.fh, self.rs,
                self.ev_t, self.ev, self.kv, self.max_running, limit_t, limit_seq,
                heap._seq, self.slot, self.latency, self.counts, self.tt, self.tq,  # noqa: SLF001
                self.tn, self.back)
            heap._seq = seq  # noqa: SLF001
            self.sink()  # the returns pushed before a retry reads the queue's head
            if e == GO:  # (b, t, s) stand: the sink changes nothing in the core
                self._arm_at(int(b), float(t), int(s))
                return
            if e == SCORED:
                self.unscored -= int(self.counts[self.slot[i], SIZE])
                self.scored(i, t)
            elif e == SHARED:
                self.told(i, t)
            elif e == ROOM_EV:
                need = int(self.g[G_NE]) + 1
                self.ev_t, self.ev = _grown(self.ev_t, 0, need), _grown(self.ev, 0, need)
            elif e >= 0:
                self._room(e)
            else:
                raise RuntimeError("the compiled pool drained a replica: it makes no drain")
