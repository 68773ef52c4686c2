"""Which replica's heap entry comes next: the compiled engines' one question at every turn.

Each replica of the compiled engines (stepped.py) keeps at most one entry on the
simulator's heap, a (when, seq) in its row (`PEND_T`, `PEND_SEQ`, `PENDING`); the core runs
the earliest of them next. The replicas' entries are kept as a tree in the core's `g`
(timeline.py: `G_ND`, `G_AT`, `G_CAP`, `G_P`): each node the replica whose entry comes
first below it. The two places that set or drop an entry (`timeline._schedule`,
`_unschedule`) mark its replica, and a read redoes the marked replicas' paths to the root
(or the whole tree, past `G_CAP` marks). A `g` with no tree (`timeline.simulate`'s) is
answered by a scan.
"""

from __future__ import annotations

import numpy as np

from harness.sim.fastcore.jit import njit
from harness.sim.fastcore.timeline import (
    G_AT,
    G_CAP,
    G_ND,
    G_P,
    NONE,
    PEND_SEQ,
    PEND_T,
    PENDING,
    Arr,
)


def with_tree(cols: int, engines: int) -> Arr:
    """A core's `g` of `cols` columns followed by the tree of `engines` replicas' entries:
    the stack of marked replicas (at most 2 x `engines`), then the tree's nodes over a
    power of 2 of leaves, marked as needing a whole build at its first read."""
    p = 1 << max(0, (engines - 1).bit_length())
    g = np.zeros(cols + 2 * engines + 2 * p, dtype=np.int64)
    g[G_AT], g[G_CAP], g[G_P] = cols, 2 * engines, p
    g[G_ND] = 2 * engines + 1
    return g


@njit(cache=True)
def next_engine(st2: Arr, fs2: Arr, g: Arr) -> int:
    """The replica whose heap entry comes first by (when, seq); -1: none has one. From the
    tree in `g` (the paths of the replicas set since its last read redone first; all of
    it past G_CAP of them), or by a scan where `g` holds none.

    Why a tree: the core asks this at every turn, about three times a request, and a
    scan of 128 replicas cost 181 ns; each turn sets one or two replicas' entries, and a
    path is 7 nodes. In the 1M-request run's structure (verl-fully-async, 128 replicas,
    65,536 requests) the compiled calls' time went from 3.31-3.44 to 2.16-2.53 us a
    request (4 runs each, interleaved), about 4% of the run."""
    if g.shape[0] <= G_P:
        return _scan(st2, fs2)
    n, at, cap, p = g[G_ND], g[G_AT], g[G_CAP], g[G_P]
    tree = at + cap
    if n > cap:
        for e in range(p):
            g[tree + p + e] = e if e < st2.shape[0] and st2[e, PENDING] != NONE else -1
        for node in range(p - 1, 0, -1):
            g[tree + node] = _first(st2, fs2, g[tree + 2 * node], g[tree + 2 * node + 1])
    else:
        for k in range(n):
            e = g[at + k]
            node = p + e
            g[tree + node] = e if st2[e, PENDING] != NONE else -1
            node //= 2
            while node >= 1:
                g[tree + node] = _first(st2, fs2, g[tree + 2 * node],
                                        g[tree + 2 * node + 1])
                node //= 2
    g[G_ND] = 0
    return g[tree + 1]


@njit(cache=True)
def before(t1: float, s1: int, t2: float, s2: int) -> bool:
    """Whether an entry at (`t1`, `s1`) comes before one at (`t2`, `s2`): the heap's order,
    earlier time first, then the earlier seq (every entry of the core is ordered so)."""
    return t1 < t2 or (t1 == t2 and s1 < s2)


@njit(cache=True)
def _first(st2: Arr, fs2: Arr, a: int, b: int) -> int:
    """Of replicas `a` and `b` (-1: none), the one whose entry comes first (`a` of equals)."""
    if a < 0:
        return b
    if b < 0:
        return a
    return b if before(fs2[b, PEND_T], st2[b, PEND_SEQ], fs2[a, PEND_T], st2[a, PEND_SEQ]) else a


@njit(cache=True)
def _scan(st2: Arr, fs2: Arr) -> int:
    """`next_engine` by looking at every replica (a `g` with no tree: `simulate`'s)."""
    best = -1
    for e in range(st2.shape[0]):
        if st2[e, PENDING] != NONE:
            best = _first(st2, fs2, best, e)
    return best
