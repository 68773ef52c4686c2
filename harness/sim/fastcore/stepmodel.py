"""The roofline step model (`harness.sim.perf.DecodeModel`) compiled: the same floating-point
operations in the same order, so a segment's time is the same double, bit for bit.

The model's constants travel as one float array (`roofline_params`), indexed by the names
below; numba then sees plain doubles, not a Python object. Python's `int * float` turns
the int into a double first, and so does numba: each expression below keeps perf.py's
order of operations. Two places need care: `math.ceil(x)` is taken only when it is below
n (perf.py's `min(n, ceil(x))`, without an int64 overflow on a huge x), and the MoE term's
power takes a float exponent, as Python's `float ** int` does (numba's integer power is a
loop of multiplications, which rounds differently).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from harness.sim.perf import DecodeModel

FIXED, PER_SEQ, WEIGHTS, PER_CTX, COMPUTE, PREFILL_TOKEN = 0, 1, 2, 3, 4, 5
ADMIT, PREFILL_TOKEN2, PREFILL_FIXED, SMALL_BATCH, SMALL_SCALE = 6, 7, 8, 9, 10
EXPERTS, ROUTE_SHARE = 11, 12
N_PARAMS = 13


def roofline_params(decode: DecodeModel) -> np.ndarray:
    """`decode`'s constants as the compiled functions read them. Only the roofline itself:
    a measured-kernel table, speculative decoding or grouped drafting is another class
    (or a subclass) and is refused here, so nothing is priced by the wrong formula."""
    if type(decode) is not DecodeModel:
        raise TypeError(f"the compiled core prices the roofline DecodeModel only, "
                        f"not {type(decode).__name__}")
    if decode.prefill_lanes != 1:
        raise TypeError("the compiled core has no attention-DP prefill (prefill_lanes 1)")
    p = np.zeros(N_PARAMS, dtype=np.float64)
    p[FIXED], p[PER_SEQ], p[WEIGHTS] = decode.fixed_s, decode.per_seq_s, decode.weights_s
    p[PER_CTX], p[COMPUTE] = decode.per_ctx_token_s, decode.compute_per_seq_s
    p[PREFILL_TOKEN], p[ADMIT] = decode.prefill_per_token_s, decode.admit_per_request_s
    p[PREFILL_TOKEN2], p[PREFILL_FIXED] = decode.prefill_per_token2_s, decode.prefill_fixed_s
    p[SMALL_BATCH], p[SMALL_SCALE] = decode.small_batch, decode.small_batch_scale
    p[EXPERTS], p[ROUTE_SHARE] = decode.experts_s, decode.route_share
    return p


@njit(cache=True)
def steps_time(p: np.ndarray, n: int, b: int, ctx: int) -> float:
    """`DecodeModel.steps_time`: seconds for n decode steps of b sequences from ctx."""
    if n <= 0:
        return 0.0
    base = n * (p[FIXED] + p[PER_SEQ] * b)
    comp = p[COMPUTE] * b
    m0 = p[WEIGHTS] + p[PER_CTX] * ctx
    if p[EXPERTS] != 0.0:
        m0 += p[EXPERTS] * (1.0 - (1.0 - p[ROUTE_SHARE]) ** float(b))
    slope = p[PER_CTX] * b
    if m0 >= comp:
        j = 0
    elif slope > 0:
        x = (comp - m0) / slope
        j = n if x >= n else int(math.ceil(x))
    else:
        j = n
    mem_steps = n - j
    mem = mem_steps * m0 + slope * (j * mem_steps + mem_steps * (mem_steps - 1) / 2)
    if b <= p[SMALL_BATCH]:
        return p[SMALL_SCALE] * (base + j * comp + mem)
    return base + j * comp + mem


@njit(cache=True)
def steps_within(p: np.ndarray, dt: float, b: int, ctx: int, cap: int) -> int:
    """`StepJump.steps_within`: the fewest steps (<= cap) whose time reaches dt."""
    if dt <= 0:
        return 0
    lo, hi = 1, cap
    if steps_time(p, hi, b, ctx) < dt:
        return cap
    while lo < hi:
        mid = (lo + hi) // 2
        if steps_time(p, mid, b, ctx) >= dt:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True)
def prefill_time(p: np.ndarray, tokens: int, squares: int, admitted: int) -> float:
    """`StepJump.prefill_time` with one prefill lane (the roofline's)."""
    if admitted == 0:
        return 0.0
    return (p[PREFILL_FIXED] + tokens * p[PREFILL_TOKEN] + squares * p[PREFILL_TOKEN2]
            + admitted * p[ADMIT])
