"""The roofline against the measured-kernel step model, on a small grid."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from harness.core.config import RunConfig
from harness.studies.steps import decode_model
from harness.studies.validate.gpu import models as gm

SMALL = {"models": ["qwen3-1.7b", "qwen2.5-32b"], "gpus": ["a100-40gb-pcie", "h100-sxm"],
         "tps": (1, 2), "batches": (1, 64, 512), "contexts": (512, 2048)}


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, Path]:
    """The reduced grid, built once, with the table cache in a temporary folder."""
    out = tmp_path_factory.mktemp("grid")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROLLOUTBENCH_CACHE", str(out / "cache"))
        return gm.grid(out / "study", **SMALL), out / "study"  # type: ignore[arg-type]


def test_cell_matches_direct_decode_model(small: tuple[pd.DataFrame, Path],
                                          monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    monkeypatch.setenv("ROLLOUTBENCH_CACHE", str(tmp_path))
    df, _ = small
    sim = RunConfig().sim
    sim.model, sim.rollout_gpu, sim.rollout_tp = "qwen3-1.7b", "h100-sxm", 2
    sim.engine_backend, sim.calibration = "sglang", "rolloutpipe"
    sim.step_model = "roofline"
    roof, _ = decode_model(sim)
    sim.step_model = "kernels"
    kern, source = decode_model(sim)
    cell = df[(df["model"] == "qwen3-1.7b") & (df["gpu"] == "h100-sxm") & (df["tp"] == 2)
              & (df["batch"] == 64) & (df["context"] == 2048)]
    assert len(cell) == 1
    row = cell.iloc[0]
    assert row["roofline_ms"] == pytest.approx(1e3 * roof.steps_time(1, 64, 64 * 2048))
    assert row["kernels_ms"] == pytest.approx(1e3 * kern.steps_time(1, 64, 64 * 2048))
    assert row["kernels_source"] == source and source.startswith("kernels:h100_sxm")


def test_ratio_and_shape(small: tuple[pd.DataFrame, Path]) -> None:
    df, out = small
    assert (df["ratio"] == df["roofline_ms"] / df["kernels_ms"]).all()
    assert (df["ratio"] > 0).all()
    assert df.groupby(["model", "gpu", "tp"]).size().eq(3 * 2).all()
    assert (out / "models.csv").exists() and (out / "models.png").stat().st_size > 0
    assert len(pd.read_csv(out / "models.csv")) == len(df)


def test_cells_that_do_not_fit_are_absent(small: tuple[pd.DataFrame, Path]) -> None:
    df, _ = small
    engines = set(df.groupby(["model", "gpu", "tp"]).groups)
    # Qwen2.5-32B is 65.5 GB of weights: not on one 40 GB card, nor on two (32.8 < 36 fits).
    assert not gm.fits("qwen2.5-32b", "a100-40gb-pcie", 1)
    assert ("qwen2.5-32b", "a100-40gb-pcie", 1) not in engines
    assert ("qwen2.5-32b", "a100-40gb-pcie", 2) in engines
    assert ("qwen2.5-32b", "h100-sxm", 1) in engines  # 65.5 < 0.9 * 80
    assert len(engines) == 7


def test_gpu_without_kernels_is_left_out(monkeypatch: pytest.MonkeyPatch,
                                        tmp_path: Path) -> None:
    monkeypatch.setenv("ROLLOUTBENCH_CACHE", str(tmp_path / "cache"))
    df = gm.grid(tmp_path, models=["qwen3-1.7b"], gpus=["mi300x", "cpu-2core"], tps=(1,),
                 batches=(1,), contexts=(512,))
    assert df.empty and list(df.columns)[-1] == "kernels_source"


def test_summary_has_buckets_and_bins(small: tuple[pd.DataFrame, Path]) -> None:
    df, _ = small
    text = gm.summary(df)
    for part in ("batch 1-16", "batch 32-128", "batch 256-512", "<90 MB", "90-700 MB",
                 ">700 MB", "mi300x", "h100-sxm", "a100-40gb-pcie"):
        assert part in text
    assert max(len(line) for line in text.splitlines()) <= 100
    # weight per GPU per layer: Qwen2.5-32B at TP 1 reads 65.5 GB / 64 layers ~ 1024 MB
    assert gm.weight_mb_per_gpu_layer("qwen2.5-32b", 1) == pytest.approx(1023.875)
