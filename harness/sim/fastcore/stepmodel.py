"""The engine's step models compiled: the roofline (`harness.sim.perf.DecodeModel`) and the
measured-kernel table (`TableDecodeModel`, the default `sim.step_model`), the same
floating-point operations in the same order, so a segment's time is the same double, bit
for bit.

A model's constants travel as one float array (`step_params`), indexed by the names below;
numba then sees plain doubles, not a Python object. A table's coefficients (a, c) at each
batch 1..max_batch are taken from the model itself (`coefficients`, the interpolation its
`steps_time` caches) and follow the head. Python's `int * float` turns the int into a
double first, and so does numba; `int / int` divides the two doubles, exact below 2**53
(numba does the same). Two places need care: `math.ceil(x)` is taken only when it is
below n (perf.py's `min(n, ceil(x))`, without an int64 overflow on a huge x), and the MoE
term's power takes a float exponent, as Python's `float ** int` does (numba's integer
power is a loop of multiplications, which rounds differently).

An eager step (`harness.sim.kernels.eager.EagerStep`: no CUDA graphs) wraps one of the two:
its own terms (the host's and the gaps' seconds a step, the framework's fixed and
per-sequence terms and cap, its small-batch scale) sit in the head beside the wrapped
model's, flagged by EAGER, and `steps_time` takes its bisection over the wrapped model's
step time, as `EagerStep.steps_time` does.
"""

from __future__ import annotations

import math

import numpy as np

from harness.sim.fastcore.choice import priced
from harness.sim.fastcore.jit import njit
from harness.sim.kernels.eager import EagerStep
from harness.sim.perf import DecodeModel, TableDecodeModel

FIXED, PER_SEQ, WEIGHTS, PER_CTX, COMPUTE, PREFILL_TOKEN = 0, 1, 2, 3, 4, 5
ADMIT, PREFILL_TOKEN2, PREFILL_FIXED, SMALL_BATCH, SMALL_SCALE = 6, 7, 8, 9, 10
EXPERTS, ROUTE_SHARE, KIND, LANES = 11, 12, 13, 14
# an eager step's own terms (EAGER 1.0: the step is eager; SMALL_BATCH and SMALL_SCALE
# above are then the wrapped model's, these its own)
EAGER, HOST, GAPS, FW_FIXED, FW_PER_SEQ, FW_CAP, EAGER_SMALL_BATCH, EAGER_SMALL_SCALE = (
    15, 16, 17, 18, 19, 20, 21, 22)
HEAD = 24  # then a table's (a, c) at batch b: p[HEAD + 2 (b - 1)], p[HEAD + 2 (b - 1) + 1]
ROOFLINE, TABLE = 0.0, 1.0
Priced = DecodeModel | TableDecodeModel | EagerStep


def step_params(decode: Priced, max_batch: int) -> np.ndarray:
    """`decode`'s constants as the compiled functions read them (a table's up to batch
    `max_batch`). Only what `priced` names: anything else is refused here, so nothing is
    priced by the wrong formula."""
    if not priced(decode):
        raise TypeError(f"the compiled core prices DecodeModel, TableDecodeModel and an "
                        f"EagerStep over one of them only, not {type(decode).__name__}")
    if type(decode) is EagerStep:
        eager: EagerStep = decode  # type: ignore[assignment]
        p = step_params(eager.kernels, max_batch)  # type: ignore[arg-type]
        p[EAGER], p[HOST], p[GAPS] = 1.0, eager.host_s, eager.gaps_s
        p[FW_FIXED], p[FW_PER_SEQ] = eager.framework_fixed_s, eager.framework_per_seq_s
        p[FW_CAP] = eager.framework_cap
        p[EAGER_SMALL_BATCH], p[EAGER_SMALL_SCALE] = eager.small_batch, eager.small_batch_scale
        p[PREFILL_TOKEN], p[ADMIT] = eager.prefill_per_token_s, eager.admit_per_request_s
        p[PREFILL_TOKEN2], p[PREFILL_FIXED] = eager.prefill_per_token2_s, eager.prefill_fixed_s
        p[LANES] = eager.prefill_lanes
        return p
    kind = type(decode)
    if kind is DecodeModel:
        p = np.zeros(HEAD, dtype=np.float64)
        d: DecodeModel = decode  # type: ignore[assignment]
        p[PER_SEQ], p[WEIGHTS], p[COMPUTE] = d.per_seq_s, d.weights_s, d.compute_per_seq_s
        p[FIXED], p[PER_CTX] = d.fixed_s, d.per_ctx_token_s
        p[EXPERTS], p[ROUTE_SHARE], p[KIND] = d.experts_s, d.route_share, ROOFLINE
    else:  # a TableDecodeModel (`priced`)
        p = np.zeros(HEAD + 2 * max_batch, dtype=np.float64)
        table: TableDecodeModel = decode  # type: ignore[assignment]
        p[KIND] = TABLE
        for b in range(1, max_batch + 1):
            p[HEAD + 2 * (b - 1)], p[HEAD + 2 * (b - 1) + 1] = table.coefficients(b)
    p[PREFILL_TOKEN], p[ADMIT] = decode.prefill_per_token_s, decode.admit_per_request_s
    p[PREFILL_TOKEN2], p[PREFILL_FIXED] = decode.prefill_per_token2_s, decode.prefill_fixed_s
    p[SMALL_BATCH], p[SMALL_SCALE] = decode.small_batch, decode.small_batch_scale
    p[LANES] = decode.prefill_lanes
    return p


@njit(cache=True)
def steps_time(p: np.ndarray, n: int, b: int, ctx: int) -> float:
    """`steps_time` of the model: seconds for n decode steps of b sequences from ctx."""
    if p[EAGER] != 0.0:
        return eager_steps_time(p, n, b, ctx)
    return kernel_steps_time(p, n, b, ctx)


@njit(cache=True)
def eager_steps_time(p: np.ndarray, n: int, b: int, ctx: int) -> float:
    """`EagerStep.steps_time`: the first j steps host-bound (the kernels' step grows with
    the context, so those come first: a bisection), the rest the kernels plus the gaps,
    and the framework's term on every step."""
    if n <= 0:
        return 0.0
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if kernel_steps_time(p, 1, b, ctx + mid * b) + p[GAPS] >= p[HOST]:
            hi = mid
        else:
            lo = mid + 1
    j = lo
    cap = int(p[FW_CAP])
    seqs = min(b, cap) if cap else b
    framework = p[FW_FIXED] + p[FW_PER_SEQ] * seqs
    t = (j * p[HOST] + kernel_steps_time(p, n, b, ctx) - kernel_steps_time(p, j, b, ctx)
         + (n - j) * p[GAPS] + n * framework)
    return p[EAGER_SMALL_SCALE] * t if b <= p[EAGER_SMALL_BATCH] else t


@njit(cache=True)
def kernel_steps_time(p: np.ndarray, n: int, b: int, ctx: int) -> float:
    """The wrapped model's `steps_time` (a roofline's or a table's)."""
    if n <= 0:
        return 0.0
    if p[KIND] == TABLE:  # `TableDecodeModel.steps_time`
        a, c = p[HEAD + 2 * (b - 1)], p[HEAD + 2 * (b - 1) + 1]
        t = n * a + c * (n * ctx / b + n * (n - 1) / 2)
        return p[SMALL_SCALE] * t if b <= p[SMALL_BATCH] else t
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
    """`StepJump.prefill_time`."""
    if admitted == 0:
        return 0.0
    if p[LANES] != 1.0:  # attention DP: the prompts spread over the ranks
        return p[PREFILL_FIXED] + (tokens * p[PREFILL_TOKEN] + squares * p[PREFILL_TOKEN2]
                                   + admitted * p[ADMIT]) / min(admitted, p[LANES])
    return (p[PREFILL_FIXED] + tokens * p[PREFILL_TOKEN] + squares * p[PREFILL_TOKEN2]
            + admitted * p[ADMIT])
