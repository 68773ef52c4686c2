"""Off-policy statistics of one optimizer step: lag and effective sample size.

Lag of a token: optimizer steps between the policy version that generated it
(its behaviour version) and the version being updated. ESS (PipelineRL Eq. 6,
normalised, token level) over the step's N tokens with importance weights
w = exp(logp_current - logp_behaviour):

    ESS = (sum w)^2 / (N * sum w^2)        in (0, 1], 1 when on-policy.

`ess_clamped` takes the statistic after clamping w at the trust bound, as
PipelineRL does with its REINFORCE loss.

The simulator cannot know real log-probabilities, so it models each token's
log-ratio with a random-walk drift model with one parameter, `drift`, the
variance the log-ratio gains per optimizer step of lag:

    log w ~ Normal(-s^2 / 2, s^2),   s^2 = drift * lag,   so E[w] = 1,

and reports the ESS a step of many tokens has under that model: the
lognormal's moments in closed form, E[w^2] = exp(s^2) and, with the clamp,
those of min(w, c), so ESS = (sum n_l E[w_l])^2 / (N sum n_l E[w_l^2]) over the
step's lags l with n_l tokens each. (Drawing the weights instead cost a sixth
of a simulation's wall time and added only sampling noise, about 1e-3 at the
calibrated drift.)

Live runs measure w from the engine's and the trainer's log-probs instead.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import chain
from typing import Any

import numpy as np


def ess(weights: np.ndarray | Sequence[float]) -> float:
    """Normalised effective sample size of importance weights."""
    w = np.asarray(weights, dtype=float)
    if w.size == 0:
        return float("nan")
    total = w.sum()
    return float(total * total / (w.size * np.square(w).sum()))


def lag_histogram(spans: Iterable[Sequence[int]], version: int) -> dict[int, int]:
    """Tokens per lag, from [behaviour version, tokens] spans."""
    hist: dict[int, int] = {}
    for v, n in spans:
        lag = version - v
        hist[lag] = hist.get(lag, 0) + n
    return hist


def add_lags(hist: dict[int, int], groups: Iterable[Any], version: int) -> None:
    """Adds every response's `lag_histogram` to `hist`, in order (a lag new to `hist`
    goes in where its first token is: `step_stats` sums floats in that order): tokens
    summed by version over all spans in one flat loop, then by lag (a version is one lag),
    rather than a dict a response (issue #36: the trainer's per-sample cost)."""
    by: dict[int, int] = {}
    get = by.get
    for v, n in chain.from_iterable([r.version_spans for g in groups for r in g.responses]):
        by[v] = get(v, 0) + n
    for v, n in by.items():
        hist[version - v] = hist.get(version - v, 0) + n


def lag_stats(hist: dict[int, int]) -> dict[str, float]:
    """Token count and lag figures of one step from its lag histogram (sums of
    integers: exact, whatever the order)."""
    tokens = sum(hist.values())
    if tokens == 0:
        nan = float("nan")
        return {"tokens": 0, "lag_min": nan, "lag_mean": nan, "lag_max": nan}
    return {"tokens": int(tokens), "lag_min": float(min(hist)),
            "lag_mean": float(sum([lag * n for lag, n in hist.items()])) / tokens,
            "lag_max": float(max(hist))}


def measured_stats(hist: dict[int, int], weights: np.ndarray, clamp: float
                   ) -> dict[str, float]:
    """Lag and ESS figures of one step from importance weights measured on real
    log-probs (the live trainer)."""
    return {**lag_stats(hist), "ess": round(ess(weights), 6),
            "ess_clamped": round(ess(np.minimum(weights, clamp)), 6)}


def _normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


@lru_cache(maxsize=4096)  # a run asks for a few lags' moments at each optimizer step
def lognormal_moments(s2: float, clamp: float) -> tuple[float, float]:
    """E[min(w, c)] and E[min(w, c)^2] for log w ~ Normal(-s2/2, s2), c = `clamp`
    (the moments of a lognormal cut at c: its part below c plus c times the
    probability of lying above)."""
    if s2 <= 0:
        w = min(1.0, clamp)
        return w, w * w
    if math.isinf(clamp):
        return 1.0, math.exp(s2)
    s, lc = math.sqrt(s2), math.log(clamp)
    above = _normal_cdf(-(lc + s2 / 2) / s)  # P(w > c)
    m1 = _normal_cdf((lc - s2 / 2) / s) + clamp * above
    m2 = math.exp(s2) * _normal_cdf((lc - 1.5 * s2) / s) + clamp * clamp * above
    return m1, m2


def step_stats(hist: dict[int, int], drift: float, clamp: float) -> dict[str, float]:
    """Lag and ESS figures of one step from its lag histogram and the drift model
    (the ESS of many tokens: see the module's docstring)."""
    tokens = sum(hist.values())
    if tokens == 0:
        return {**lag_stats(hist), "ess": float("nan"), "ess_clamped": float("nan")}
    first = second = first_c = second_c = 0.0  # each sum in the order of `hist`
    inf = math.inf
    for lag, n in hist.items():
        s2 = drift * lag if lag else 0.0
        m1, m2 = lognormal_moments(s2, inf)
        first += n * m1
        second += n * m2
        m1, m2 = lognormal_moments(s2, clamp)
        first_c += n * m1
        second_c += n * m2
    stats = lag_stats(hist)
    stats["ess"] = round(first * first / (tokens * second), 6)
    stats["ess_clamped"] = round(first_c * first_c / (tokens * second_c), 6)
    return stats
