"""ESS and lag against hand-computed values, and the drift model's mean."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.offpolicy import add_lags, ess, lag_histogram, step_stats


def test_ess_hand_values() -> None:
    assert ess([1, 1, 1, 1]) == pytest.approx(1.0)
    assert ess([2, 0, 0, 0]) == pytest.approx(2**2 / (4 * 4))  # one weight carries all
    assert ess([1, 3]) == pytest.approx((1 + 3) ** 2 / (2 * (1 + 9)))  # 0.8
    assert math.isnan(ess([]))


def test_lag_histogram_and_step_lags() -> None:
    hist = lag_histogram([[0, 10], [2, 5], [2, 1]], version=3)
    assert hist == {3: 10, 1: 6}
    stats = step_stats(hist, drift=0.0, clamp=5.0)
    assert stats["tokens"] == 16
    assert (stats["lag_min"], stats["lag_max"]) == (1.0, 3.0)
    assert stats["lag_mean"] == pytest.approx((3 * 10 + 1 * 6) / 16)
    assert stats["ess"] == pytest.approx(1.0)  # no drift: on-policy weights are all 1


def test_drift_model_ess_hand_values() -> None:
    # One lag, no clamp: ESS = N / (N exp(s2)) = exp(-drift * lag), rounded to 6 places.
    drift, lag = 0.05, 4
    stats = step_stats({lag: 60_000}, drift=drift, clamp=math.inf)
    assert stats["ess"] == round(math.exp(-drift * lag), 6)
    # Two lags: (n0 + n1)^2 / (N (n0 + n1 exp(s2))).
    two = step_stats({0: 3_000, 2: 1_000}, drift=0.1, clamp=math.inf)
    assert two["ess"] == round(4_000 / (3_000 + 1_000 * math.exp(0.2)), 6)
    # A clamp far below 1 cuts every weight to c: all equal, ESS 1; a clamp of 1
    # removes the heavy tail, so the ESS rises.
    assert step_stats({lag: 100}, drift=drift, clamp=1e-9)["ess_clamped"] == 1.0
    clamped = step_stats({lag: 60_000}, drift=drift, clamp=1.0)
    assert clamped["ess_clamped"] > clamped["ess"]
    assert step_stats({lag: 10}, drift=drift, clamp=1e12)["ess_clamped"] == stats["ess"]


@pytest.mark.parametrize(("drift", "clamp"), [(0.1, math.inf), (0.1, 1.2), (0.02, 0.9)])
def test_drift_model_ess_equals_many_drawn_weights(drift: float, clamp: float) -> None:
    """The closed form against the model itself: 400,000 weights drawn per token as
    log w ~ Normal(-s2/2, s2), s2 = drift x lag, with and without the clamp."""
    hist = {0: 100_000, 1: 150_000, 2: 150_000}
    lags = np.repeat(np.array(list(hist), dtype=float), list(hist.values()))
    rng = np.random.default_rng(5)
    weights = np.exp(rng.standard_normal(lags.size) * np.sqrt(drift * lags) - drift * lags / 2)
    stats = step_stats(hist, drift, clamp)
    assert weights.mean() == pytest.approx(1.0, abs=0.003)  # E[w] = 1
    assert stats["ess"] == pytest.approx(ess(weights), rel=0.003)
    assert stats["ess_clamped"] == pytest.approx(ess(np.minimum(weights, clamp)), rel=0.003)


def _merged(groups: list[list[list[list[int]]]], version: int) -> dict[int, int]:
    """`SimTrainer.train`'s sum as it was: each response's `lag_histogram`, added in turn."""
    hist: dict[int, int] = {}
    for group in groups:
        for spans in group:
            for lag, n in lag_histogram(spans, version).items():
                hist[lag] = hist.get(lag, 0) + n
    return hist


class _Resp:
    def __init__(self, spans: list[list[int]]) -> None:
        self.version_spans = spans


class _Group:
    def __init__(self, group: list[list[list[int]]]) -> None:
        self.responses = [_Resp(s) for s in group]


SPANS = st.lists(st.lists(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 900)).map(list),
                                   max_size=4), max_size=5), max_size=4)


@settings(max_examples=200, deadline=None)
@given(SPANS, st.integers(0, 8), st.dictionaries(st.integers(-6, 8), st.integers(0, 50)))
def test_add_lags_is_the_per_response_histograms_summed_in_the_same_order(
        groups: list[list[list[list[int]]]], version: int, before: dict[int, int]) -> None:
    """The same counts and the same key order (`step_stats` sums floats in it)."""
    want = dict(before)
    for lag, n in _merged(groups, version).items():
        want[lag] = want.get(lag, 0) + n
    got = dict(before)
    add_lags(got, [_Group(g) for g in groups], version)
    assert list(got.items()) == list(want.items())


def test_add_lags_hand_values() -> None:
    """Version 3: spans of versions 0 and 2 then 3 and 0: lags 3, 1, 0 in that order."""
    hist = {1: 2}
    add_lags(hist, [_Group([[[0, 10], [2, 5]], [[3, 4], [0, 1]]])], 3)
    assert list(hist.items()) == [(1, 7), (3, 11), (0, 4)]
