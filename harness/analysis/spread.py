"""The spread of a metric over seeds: mean, sample standard deviation and a 95%
Student-t interval.

Why: one seed's mean says nothing about how much another seed would move it, so
`compare` reports every mean with its spread over the seeds behind it. A seed is
one run (its rounds averaged first), because rounds of one run share its prompts
and its state and are not independent draws. The interval needs at least
`MIN_SEEDS_FOR_CI` seeds: with two, t(0.975, 1) = 12.7 makes it wider than it is
useful.

The t quantiles are a table (scipy is not a dependency of rolloutbench): the
0.975 quantiles for 1 to 30 degrees of freedom to 6 decimals, then 40, 60, 120
and the normal limit, interpolated linearly in 1 / df (within 6e-5 of the exact
quantile from 31 on). Values: any t table, e.g. NIST/SEMATECH e-Handbook of
Statistical Methods, section 1.3.6.7.2; checked against scipy.stats.t.ppf by the
tests where scipy is installed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

MIN_SEEDS_FOR_CI = 3
# t(0.975, df) for df = 1 .. 30
T975 = (12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004,
        2.262157, 2.228139, 2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905,
        2.109816, 2.100922, 2.093024, 2.085963, 2.079614, 2.073873, 2.068658, 2.063899,
        2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272)
# (df, t(0.975, df)) past the table; df = inf is the normal quantile
T975_TAIL = ((30, 2.042272), (40, 2.021075), (60, 2.000298), (120, 1.979930),
             (math.inf, 1.959964))


def t975(df: int) -> float:
    """The 0.975 quantile of Student's t with `df` >= 1 degrees of freedom."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    if df <= len(T975):
        return T975[df - 1]
    for (lo, t_lo), (hi, t_hi) in zip(T975_TAIL, T975_TAIL[1:], strict=False):
        if df <= hi:
            x, x_lo, x_hi = 1 / df, 1 / lo, 1 / hi  # 1 / inf = 0
            return t_hi + (t_lo - t_hi) * (x - x_hi) / (x_lo - x_hi)
    return T975_TAIL[-1][1]


def spread(values: Sequence[float]) -> dict[str, Any]:
    """{"n", "mean", "sd", "ci_low", "ci_high"} of the finite values (NaN skipped):
    sd is the sample one (n - 1), NaN below 2 values; the 95% t-interval is NaN
    below MIN_SEEDS_FOR_CI values."""
    kept = [v for v in values if not math.isnan(v)]
    n = len(kept)
    mean = sum(kept) / n if n else math.nan
    sd = math.sqrt(sum((v - mean) ** 2 for v in kept) / (n - 1)) if n >= 2 else math.nan
    half = t975(n - 1) * sd / math.sqrt(n) if n >= MIN_SEEDS_FOR_CI else math.nan
    return {"n": n, "mean": mean, "sd": sd, "ci_low": mean - half, "ci_high": mean + half}
