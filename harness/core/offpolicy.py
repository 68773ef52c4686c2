"""Off-policy statistics of one optimizer step: lag and effective sample size.

Lag of a token: optimizer steps between the policy version that generated it
(its behaviour version) and the version being updated. ESS (PipelineRL Eq. 6,
normalised, token level) over the step's N tokens with importance weights
w = exp(logp_current - logp_behaviour):

    ESS = (sum w)^2 / (N * sum w^2)        in (0, 1], 1 when on-policy.

`ess_clamped` takes the statistic after clamping w at the trust bound, as
PipelineRL does with its REINFORCE loss.

The simulator cannot know real log-probabilities, so it draws each token's
log-ratio from a random-walk drift model with one parameter, `drift`, the
variance the log-ratio gains per optimizer step of lag:

    log w ~ Normal(-s^2 / 2, s^2),   s^2 = drift * lag,   so E[w] = 1.

Live runs measure w from the engine's and the trainer's log-probs instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np

MAX_SAMPLED_TOKENS = 1 << 13  # ESS is estimated on a uniform sample of the step's tokens


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


def lag_stats(hist: dict[int, int]) -> dict[str, float]:
    """Token count and lag figures of one step from its lag histogram."""
    tokens = sum(hist.values())
    if tokens == 0:
        nan = float("nan")
        return {"tokens": 0, "lag_min": nan, "lag_mean": nan, "lag_max": nan}
    return _lag_figures(np.fromiter(hist, dtype=float),
                        np.fromiter(hist.values(), dtype=float), tokens)


def _lag_figures(lags: np.ndarray, counts: np.ndarray, tokens: int) -> dict[str, float]:
    return {"tokens": int(tokens), "lag_min": float(lags.min()),
            "lag_mean": float((lags * counts).sum() / tokens), "lag_max": float(lags.max())}


def measured_stats(hist: dict[int, int], weights: np.ndarray, clamp: float
                   ) -> dict[str, float]:
    """Lag and ESS figures of one step from importance weights measured on real
    log-probs (the live trainer)."""
    return {**lag_stats(hist), "ess": round(ess(weights), 6),
            "ess_clamped": round(ess(np.minimum(weights, clamp)), 6)}


def _weights_all_one(hist: dict[int, int], drift: float, clamp: float) -> bool:
    """Whether the drift model draws a weight of exactly 1 for every token: no token
    has a lag that drifts (lag 0, or no drift) and the clamp does not cut 1. The
    weights are then exp(z * 0 - 0) = 1 whatever z is drawn, and both ESS figures
    are n^2 / (n * n) = 1.0 exactly, so the draws can be skipped."""
    return math.isfinite(drift) and clamp >= 1 and all(drift * lag == 0 for lag in hist)


def step_stats(
    hist: dict[int, int], drift: float, clamp: float,
    rng: np.random.Generator | Callable[[], np.random.Generator],
) -> dict[str, float]:
    """Lag and ESS figures of one step from its lag histogram and the drift model.
    `rng` may be a function that makes the generator: an on-policy step (the common
    case) needs none, and making one costs more than the rest of the step."""
    tokens = sum(hist.values())
    if tokens == 0:
        return {**lag_stats(hist), "ess": float("nan"), "ess_clamped": float("nan")}
    if _weights_all_one(hist, drift, clamp):
        return {**lag_stats(hist), "ess": 1.0, "ess_clamped": 1.0}
    if callable(rng):
        rng = rng()
    lags = np.fromiter(hist, dtype=float)
    counts = np.fromiter(hist.values(), dtype=float)
    share = min(1.0, MAX_SAMPLED_TOKENS / tokens)
    drawn = rng.binomial(counts.astype(np.int64), share) if share < 1 else counts.astype(int)
    if drawn.sum() == 0:
        drawn[np.argmax(counts)] = 1
    # log w = z * sqrt(s2) - s2 / 2 with s2 = drift * lag per token. s2 takes one value
    # per lag, so its square root and half are taken per lag and then repeated: the
    # same numbers as taking them per token, at a fraction of the cost.
    s2 = drift * lags
    log_w = rng.standard_normal(int(drawn.sum()))
    np.multiply(log_w, np.repeat(np.sqrt(s2), drawn), out=log_w)
    np.subtract(log_w, np.repeat(s2 / 2, drawn), out=log_w)
    weights = np.exp(log_w)
    value = round(ess(weights), 6)
    # Clamping changes nothing when no weight exceeds the clamp (the usual case).
    clamped = value if weights.max() <= clamp else round(ess(np.minimum(weights, clamp)), 6)
    return {**_lag_figures(lags, counts, tokens), "ess": value, "ess_clamped": clamped}
