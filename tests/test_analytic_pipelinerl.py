"""Hand-computed checks of the PipelineRL Appendix A throughput model."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from harness.studies.analytic import pipelinerl as pl


def test_utilisation_memory_bound_by_hand() -> None:
    # h = 64 (already a multiple of 64, no padding):
    #   FLOPs = 2 * 4096 * 16384 * 64                     = 8,589,934,592
    #   bytes = 2 * (4096*64 + 64*16384 + 4096*16384)     = 136,839,168
    #   t_mem = 136,839,168 / (0.80 * 3.35e12)            = 5.10594e-5 s
    #   t_cmp = 8,589,934,592 / (0.75 * 989.4e12)         = 1.15760e-5 s  -> memory bound
    #   U     = 8,589,934,592 / (989.4e12 * 5.10594e-5)   = 0.170037
    assert pl.utilisation(64) == pytest.approx(0.170037, rel=1e-5)
    # h = 128: bytes = 2 * (20480*128 + 67,108,864) = 139,460,608 -> t_mem = 5.20375e-5 s,
    #   t_cmp = 2.31519e-5 s; U = 17,179,869,184 / (989.4e12 * 5.20375e-5) = 0.333681
    assert pl.utilisation(128) == pytest.approx(0.333681, rel=1e-5)


def test_utilisation_compute_bound_and_padding_by_hand() -> None:
    # h = 1024: t_cmp = 1.37439e11 / 7.4205e14 = 1.85215e-4 s > t_mem = 6.57316e-5 s,
    # so U is exactly the assumed compute efficiency.
    assert pl.utilisation(1024) == pytest.approx(pl.ETA_COMPUTE, rel=1e-12)
    # h = 100 runs as a 128-wide kernel: same time, 100/128 of the useful FLOPs.
    assert pl.utilisation(100) == pytest.approx(pl.utilisation(128) * 100 / 128, rel=1e-12)
    # without padding the memory-bound regime is nearly linear: U(100) ~ 100/64 * U(64)
    assert pl.utilisation(100, pad=1) == pytest.approx(pl.utilisation(64) * 100 / 64, rel=0.02)
    u = pl.utilisation(np.arange(1, 513, dtype=float))
    assert u.shape == (512,) and np.all((u > 0) & (u <= 1))
    with pytest.raises(ValueError):
        pl.utilisation(0)


def test_tau_is_the_papers() -> None:
    # A.4 prints r_conv^train = 26.02 for N = 128 and Eq. (15) is r_conv^train = N / tau:
    # tau = 128 / 26.02 = 4.91929... flashes per trained token.
    assert pl.TAU == pytest.approx(4.91929, abs=1e-5)
    # A.4's PipelineRL line, r_pipeline^train = 17.08 at I = 44, agrees through Eq. (18):
    # (128 - 44) / 4.91929 = 17.0756, which prints as 17.08.
    assert round(pl.r_pipeline(128, 44, 192, pl.TAU, 32768, 128)["train"], 2) == 17.08
    assert pl.r_conv(128, 128, 256, 32768, pl.TAU)["train"] == pytest.approx(26.02, rel=1e-12)


def test_r_conv_tiny_by_hand() -> None:
    # N=2, B=2, S=4, L=3, tau=4. Uniform lengths 1..3: h(l) = 4*(3-l+1)/3 = 4, 8/3, 4/3,
    # i.e. 2, 4/3, 2/3 per GPU; K = S * L_bar = 4 * 2 = 8 tokens.
    # Constant U = 0.5: t_gen = (2 + 4/3 + 2/3) / 0.5 = 8 -> gen = 8/8 = 1 (= N U);
    # train = N/tau = 0.5; total = 1 / (1/1 + 1/0.5) = 1/3; max lag G - 1 = 4/2 - 1 = 1.
    r = pl.r_conv(2, 2, 4, 3, 4.0, util=lambda h: 0.5 + 0 * h)
    assert r["gen"] == pytest.approx(1.0)
    assert r["train"] == pytest.approx(0.5)
    assert r["total"] == pytest.approx(1 / 3)
    assert r["g_max"] == pytest.approx(1.0)
    # U(h) = h / (1 + h): h/U = 1 + h, t_gen = 3 + 7/3 + 5/3 = 7 -> gen = 8/7
    r = pl.r_conv(2, 2, 4, 3, 4.0, util=lambda h: h / (1 + h))
    assert r["gen"] == pytest.approx(8 / 7)
    assert r["total"] == pytest.approx(1 / (7 / 8 + 2))


def test_r_pipeline_is_min_of_stages() -> None:
    # U = 0.5: I=3 -> gen 1.5, train (8-3)/2 = 2.5 -> generation-bound
    r = pl.r_pipeline(8, 3, 4, 2.0, 9, 2, util=lambda h: 0.5)
    assert (r["gen"], r["train"], r["total"]) == pytest.approx((1.5, 2.5, 1.5))
    # I=6 -> gen 3, train 1 -> training-bound
    r = pl.r_pipeline(8, 6, 4, 2.0, 9, 2, util=lambda h: 0.5)
    assert (r["gen"], r["train"], r["total"]) == pytest.approx((3.0, 1.0, 1.0))
    r = pl.r_pipeline(128, 44, 192, 5.0, 32768, 128)
    assert r["total"] == min(r["gen"], r["train"])


def test_g_max_by_hand() -> None:
    # H=4, I=3, L=9, B=2: L_bar = 5, H I L / (L_bar B) = 108 / 10 = 10.8 -> 11
    assert pl.g_max_pipeline(4, 3, 9, 2) == 11
    assert pl.r_pipeline(8, 3, 4, 2.0, 9, 2, util=lambda h: 0.5)["g_max"] == 11
    # H=5, I=2, L=9, B=2: 90 / 10 = 9 exactly -> 9 (no float round-up)
    assert pl.g_max_pipeline(5, 2, 9, 2) == 9
    np.testing.assert_array_equal(pl.g_max_pipeline(np.array([4, 5]), np.array([3, 2]), 9, 2),
                                  [11, 9])


@pytest.fixture(scope="module")
def res() -> dict[str, np.ndarray]:
    return pl.search()


def test_case_study_fast_and_finite(res: dict[str, np.ndarray]) -> None:
    t0 = time.perf_counter()
    cs = pl.case_study()
    elapsed = time.perf_counter() - t0
    assert elapsed < 10.0
    assert all(math.isfinite(float(v)) for v in cs.values())
    assert cs == pl.case_study(res=res)
    assert cs["pipe_total"] == min(cs["pipe_gen"], cs["pipe_train"])
    assert cs["conv_train"] == pytest.approx(cs["N"] / cs["tau"])
    assert pl.g_max_pipeline(cs["H"], cs["I"], cs["L"], cs["B"]) <= cs["g_max"]
    assert cs["speedup"] == pytest.approx(cs["pipe_total"] / cs["conv_total"])
    # the best PipelineRL throughput can only grow as the lag allowance grows; so does
    # conventional RL's (a larger G means larger generation batches)
    assert np.all(np.diff(res["pipe_total"]) >= 0)
    assert np.all(np.diff(res["conv_total"]) > 0)
    paper = {"speedup": 1.57, "g_max": 133, "H": 192, "I": 44, "pipe_gen": 16.9,
             "pipe_train": 17.08, "pipe_total": 16.9, "conv_gen": 18.3, "conv_train": 26.02,
             "conv_total": 10.7}
    print(f"\ncase study ({elapsed:.2f} s), ours vs paper (predictions, not asserted):")
    for k, v in paper.items():
        print(f"  {k:10s} ours {cs[k]:8.3f}   paper {v}")


def test_figures_written_atomically(res: dict[str, np.ndarray], tmp_path) -> None:
    pl.figure8(tmp_path / "fig8.png")
    pl.figure9(tmp_path / "fig9.png", res=res)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig8.png", "fig9.png"]
    assert all(p.stat().st_size > 1000 for p in tmp_path.iterdir())
