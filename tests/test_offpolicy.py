"""ESS and lag against hand-computed values, and the drift model's mean."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.core.offpolicy import ess, lag_histogram, step_stats


def test_ess_hand_values() -> None:
    assert ess([1, 1, 1, 1]) == pytest.approx(1.0)
    assert ess([2, 0, 0, 0]) == pytest.approx(2**2 / (4 * 4))  # one weight carries all
    assert ess([1, 3]) == pytest.approx((1 + 3) ** 2 / (2 * (1 + 9)))  # 0.8
    assert math.isnan(ess([]))


def test_lag_histogram_and_step_lags() -> None:
    hist = lag_histogram([[0, 10], [2, 5], [2, 1]], version=3)
    assert hist == {3: 10, 1: 6}
    stats = step_stats(hist, drift=0.0, clamp=5.0, rng=np.random.default_rng(0))
    assert stats["tokens"] == 16
    assert (stats["lag_min"], stats["lag_max"]) == (1.0, 3.0)
    assert stats["lag_mean"] == pytest.approx((3 * 10 + 1 * 6) / 16)
    assert stats["ess"] == pytest.approx(1.0)  # no drift: on-policy weights are all 1


def test_drift_model_has_unit_mean_and_expected_ess() -> None:
    # log w ~ N(-s2/2, s2): E[w] = 1 and the large-sample ESS tends to exp(-s2).
    drift, lag = 0.05, 4
    stats = step_stats({lag: 60_000}, drift=drift, clamp=1e9, rng=np.random.default_rng(1))
    assert stats["ess"] == pytest.approx(math.exp(-drift * lag), abs=0.01)
    clamped = step_stats({lag: 60_000}, drift=drift, clamp=1.0, rng=np.random.default_rng(1))
    assert clamped["ess_clamped"] > clamped["ess"]  # clamping removes the heavy tail
