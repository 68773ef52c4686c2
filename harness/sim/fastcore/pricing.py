"""The kernel trainer's micro-batch pricing compiled: `KernelPricer.priced`
(harness/sim/trainer/pricer.py) as one numba call, the same seconds bit for bit.

Why: a train call of verl-fully-async at 128 replicas spreads 512 sequences over 128 data-
parallel ranks and prices each rank's micro-batches; in Python that is a heap step a
sequence and a call a micro-batch, 7-8% of the 1M-request run's CPU (docs/simulated-
core.md, "The trainer and the metrics per request").
Here the same rules run in one call: each sequence (longest first) to the least-loaded
rank (the lowest of equals, as a heap of (load, rank) pops it), each rank's sequences cut
into micro-batches of at most `limit` tokens in order, each micro-batch's attention added
shortest first, the busiest rank's seconds returned. The floats are added and multiplied
in Python's order, one IEEE operation at a time (numba contracts nothing without
fastmath), so the result is Python's to the bit (tests/test_trainer_pricing_compiled.py).

The look-ups stay Python's (the kernel tables): `attention[n]` is a sequence length's,
`dense[j]` the (forward, backward, collectives) of a micro-batch padded to j units; NaN
marks one not computed yet. A call that meets one it lacks returns NaN and lists it in
`need_att` / `need_dense`; the caller computes those and calls again (`Looks`).

Used only where the process has loaded numba already (a run on the compiled pool,
harness/sim/runtime.py): the pricer looks for this module in `sys.modules`, so that a run
on `SimEngine`s never pays numba's import for it.
"""

from __future__ import annotations

import math

import numpy as np

from harness.sim.fastcore.jit import Direct, njit
from harness.sim.trainer import constants

BACKWARD = constants.ATTENTION_BACKWARD_OVER_FORWARD


@njit(cache=True)
def _priced(order: np.ndarray, dp: int, limit: int, unit: int, cp: int, pp: int,
            scale: float, recompute: int, forwards: int, shard: float, fixed: float,
            unbubbled: float, attention: np.ndarray, dense: np.ndarray,
            need_att: np.ndarray, need_dense: np.ndarray) -> tuple[float, int, int]:
    """The busiest rank's seconds for sequences `order` (longest first), or NaN with
    the counts of look-ups missing (their keys in `need_att`, `need_dense`)."""
    n = order.shape[0]
    rank = np.empty(n, dtype=np.int64)
    load = np.zeros(dp, dtype=np.int64)  # a heap of (load, rank), as Python's of tuples
    ranks = np.arange(dp)
    for s in range(n):  # the least-loaded rank, the lowest of equals: the heap's top
        rank[s] = ranks[0]
        _replace_top(load, ranks, load[0] + order[s])
    missing_att = missing_dense = 0
    for s in range(n):  # every sequence's attention known first
        length = order[s]
        if length >= attention.shape[0] or math.isnan(attention[length]):
            need_att[missing_att] = length
            missing_att += 1
    if missing_att:
        return math.nan, missing_att, 0
    first = np.zeros(dp + 1, dtype=np.int64)  # a counting sort by rank: rank r's
    for s in range(n):  # sequences are members[first[r]:first[r + 1]], in order
        first[rank[s] + 1] += 1
    for r in range(dp):
        first[r + 1] += first[r]
    members = np.empty(n, dtype=np.int64)
    filled = first[:dp].copy()
    for s in range(n):
        members[filled[rank[s]]] = order[s]
        filled[rank[s]] += 1
    worst = 0.0  # an idle rank's time (Python's int 0)
    cuts = np.empty(n + 1, dtype=np.int64)  # a rank's micro-batches: cuts[c]:cuts[c + 1]
    for r in range(dp):
        if first[r] == first[r + 1]:
            continue
        m, used = 0, 0  # filled in order; a sequence over `limit` goes in one of its own
        cuts[0] = first[r]
        for j in range(first[r], first[r + 1]):
            if j > first[r] and used + members[j] > limit:
                m += 1
                cuts[m] = j
                used = 0
            used += members[j]
        m += 1
        cuts[m] = first[r + 1]
        total = 0.0  # Python's sum of the micro-batches' times, in order
        for c in range(m):
            tokens = 0
            for q in range(cuts[c], cuts[c + 1]):
                tokens += members[q]
            key = -(-tokens // unit)  # units of PAD_TO a GPU's rows are padded to
            if key >= dense.shape[0] or math.isnan(dense[key, 0]):
                need_dense[missing_dense] = key
                missing_dense += 1
                continue
            attn = 0.0
            for q in range(cuts[c + 1] - 1, cuts[c] - 1, -1):  # shortest first
                attn += attention[members[q]]
            attn /= cp
            backward = dense[key, 1] + BACKWARD * attn
            forward = dense[key, 0] + attn
            update = forward * recompute + backward
            kernels = scale * (update + forwards * forward)
            stage = (max(kernels, shard) + dense[key, 2] + fixed) / pp
            if pp > 1:
                stage /= unbubbled
            total += stage
        if total > worst:
            worst = total
    if missing_dense:
        return math.nan, 0, missing_dense
    return worst, 0, 0


@njit(cache=True)
def _replace_top(load: np.ndarray, ranks: np.ndarray, top: int) -> None:
    """The heap's top (its least (load, rank)) given load `top`, sifted down."""
    dp, i, r = load.shape[0], 0, ranks[0]
    while True:
        c = 2 * i + 1
        if c >= dp:
            break
        if c + 1 < dp and (load[c + 1] < load[c] or (load[c + 1] == load[c]
                                                      and ranks[c + 1] < ranks[c])):
            c += 1
        if load[c] < top or (load[c] == top and ranks[c] < r):
            load[i], ranks[i] = load[c], ranks[c]
            i = c
        else:
            break
    load[i], ranks[i] = top, r


PRICED = Direct(_priced)
