"""Solving f(x) = target for one knob by bracketing, with a small evaluation budget.

Each evaluation of f is a simulation (seconds to tens of seconds), so the solver
spends few: it first looks for a sign change among the points already known
(other claims of the same configuration evaluated them), evaluates the ends of
the bracket only if needed, then narrows the bracket with Illinois steps (a
regula falsi that halves the weight of a stale end, so it cannot stall). x is
searched in log space: the knobs are positive scale factors.

The answer is interpolated inside the last bracket rather than taken at the
last point evaluated: with a budget of a few evaluations that is the better
estimate. When the target is not bracketed at all, the answer is the point
that came closest, flagged `unreachable`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Solution:
    x: float  # the knob value at which f reaches the target (or the closest point)
    status: str  # "found" (|f - target| <= ftol), "bracketed" (budget spent), "unreachable"
    y: float  # f at x when evaluated there, else the interpolated value (= target)
    evals: int  # new evaluations this search made (cached points are free)
    lo: float  # the last bracket (or the searched range when unreachable)
    hi: float


def solve(f: Callable[[float], float], target: float, lo: float, hi: float,
          known: dict[float, float] | None = None, max_evals: int = 8,
          ftol: float = 0.0, log: bool = True) -> Solution:
    """x in [lo, hi] with f(x) = target, for an f that crosses the target once.

    `known` holds points evaluated before (x -> f(x)); it is updated with every new
    evaluation, so searches of several claims on one cache share their points."""
    pts = known if known is not None else {}
    evals = 0

    def at(x: float) -> float:
        nonlocal evals
        if x not in pts:
            pts[x] = f(x)
            evals += 1
        return pts[x]

    fwd = math.log if log else float
    back = math.exp if log else float

    def closest() -> Solution:
        inside = {x: y for x, y in pts.items() if lo <= x <= hi and not math.isnan(y)}
        best = min(inside, key=lambda x: abs(inside[x] - target)) if inside else lo
        return Solution(best, "unreachable", inside.get(best, math.nan), evals, lo, hi)

    def bracket() -> tuple[float, float] | None:
        """The tightest pair of neighbouring known points whose f straddles the target."""
        xs = sorted(x for x in pts if lo <= x <= hi and not math.isnan(pts[x]))
        pairs = [(a, b) for a, b in zip(xs, xs[1:], strict=False)
                 if (pts[a] - target) * (pts[b] - target) <= 0]
        return min(pairs, key=lambda p: fwd(p[1]) - fwd(p[0])) if pairs else None

    for x in (x for x, y in pts.items() if lo <= x <= hi and abs(y - target) <= ftol):
        return Solution(x, "found", pts[x], 0, x, x)
    pair = bracket()
    if pair is None:
        for end in (lo, hi):
            if evals < max_evals:
                at(end)
        pair = bracket()
        if pair is None:
            return closest()
    a, b = pair
    ga, gb = pts[a] - target, pts[b] - target  # ga is halved when a is kept (Illinois)
    kept = 0  # how many steps in a row end a survived
    while evals < max_evals and ga != 0 and gb != 0:
        ua, ub = fwd(a), fwd(b)
        u = ub - gb * (ub - ua) / (gb - ga)
        low, high = min(ua, ub), max(ua, ub)
        # Bisect instead when the step hugs an end, or when one end has survived twice
        # (a strongly curved f): the bracket then at least halves.
        if kept >= 2 or not (low + 0.05 * (high - low) < u < high - 0.05 * (high - low)):
            u = (ua + ub) / 2
        x = back(u)
        g = at(x) - target
        if math.isnan(g):
            break
        if abs(g) <= ftol:
            return Solution(x, "found", g + target, evals, min(a, b), max(a, b))
        if g * gb < 0:
            a, ga = b, gb
            kept = 0
        else:
            ga /= 2
            kept += 1
        b, gb = x, g
    for end in (a, b):
        if pts[end] == target:
            return Solution(end, "found", target, evals, end, end)
    ua, ub = fwd(a), fwd(b)
    ya, yb = pts[a] - target, pts[b] - target  # the true values for the final estimate
    x = back(ub - yb * (ub - ua) / (yb - ya))
    return Solution(x, "bracketed", target, evals, min(a, b), max(a, b))
