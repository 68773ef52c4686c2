"""PipelineRL Appendix A re-derived with a measured, not modelled, GEMM utilisation U(h).

Why: `analytic.pipelinerl.utilisation` is our roofline of the paper's benchmark GEMM, and with
it (and the paper's tau = 128 / 26.02) the optimum lands at 1.70x, g_max 123, H 253, I 31, while
the paper, whose U(h) (its Fig. 8) was measured on an H100, reports about 1.57x, g_max ~133,
H 192, I 44. Swapping in a measured U(h) and leaving the rest of the model alone tells how much
of that gap the roofline causes (measured: 1.52x, g_max 110, H 138, I 51).

Data: aiconfigurator-core's measured H100 SXM kernel table for vLLM 0.24.0
(`systems/data/h100_sxm/gemm/vllm/0.24.0/gemm_perf.parquet`), rows with gemm_dtype "bfloat16"
(kernel torch.nn.functional.linear, i.e. (m, k) x (k, n) -> (m, n)). The paper's product is
(4096 x h) x (h x 16384): h is the contraction dim, so we take m = 4096, n = 16384, k = h.
The table measures k only at 32, 64, 128, 256, 512, ... (no k = 192), so nothing is rescaled
by FLOPs: every point is an exact (4096, 16384, k) row.

Interpolation: the latency, not U, is interpolated, linearly in h between measured k, because
latency is the smooth quantity (nearly flat while memory-bound); U(h) = 2*4096*16384*h /
(latency * PEAK_FLOPS). Below the smallest measured k the latency is held at its value there
(memory-bound: time does not shrink with h), so U falls linearly to 0; h beyond the largest
measured k is refused. `batch_dim="m"` instead reads h as the token dim of the decoding GEMM
(m = h, n = 16384, k = 4096), a sensitivity check on the paper's ambiguous notation.
"""

from __future__ import annotations

import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from harness.core.plots import save_figure
from harness.studies.analytic import pipelinerl as pl

TABLE_REL = "systems/data/h100_sxm/gemm/vllm/0.24.0/gemm_perf.parquet"
U_MODEL = "measured h100_sxm vllm 0.24.0 gemm"
PAPER = {"speedup": 1.57, "g_max": 133, "H": 192, "I": 44}
BatchDim = Literal["k", "m"]


def default_table() -> Path:
    """The parquet file inside the installed aiconfigurator_core package."""
    import aiconfigurator_core

    return Path(aiconfigurator_core.__file__).parent / TABLE_REL


def table_of(system: str, backend: str = "vllm") -> Path | None:
    """The database's GEMM table of `system` for `backend`'s current version (None: none)."""
    from harness.sim.kernels.estimator import backend_version

    version = backend_version(system, backend)
    if version is None:
        return None
    return default_table().parents[4] / system / "gemm" / backend / version / "gemm_perf.parquet"


@lru_cache(maxsize=8)
def _points(path: str, batch_dim: BatchDim) -> pd.DataFrame:
    df = pd.read_parquet(path, columns=["gemm_dtype", "m", "n", "k", "latency"])
    df = df[df["gemm_dtype"] == "bfloat16"]
    if batch_dim == "k":  # the paper's literal (4096 x h) x (h x 16384)
        rows = df[(df["m"] == pl.GEMM_M) & (df["n"] == pl.GEMM_N)]
    else:  # decoding: h tokens x hidden 4096 -> 16384 outputs
        rows = df[(df["n"] == pl.GEMM_N) & (df["k"] == pl.GEMM_M)]
    if rows.empty or rows.duplicated(["m", "n", "k"]).any():
        raise ValueError(f"expected one bf16 row per h for batch_dim={batch_dim!r} in {path}")
    pts = rows.assign(h=rows[batch_dim]).sort_values("h").reset_index(drop=True)
    pts["latency_s"] = pts["latency"] * 1e-3  # the table stores milliseconds
    pts["u"] = utilisation_of(pts["h"], pts["latency_s"])
    return pts[["m", "n", "k", "h", "latency", "latency_s", "u"]]


def measured_points(gemm_table: str | Path | None = None,
                    batch_dim: BatchDim = "k") -> pd.DataFrame:
    """The table rows U(h) is built from (h ascending, latency in ms and s, U at each)."""
    return _points(str(Path(gemm_table or default_table()).resolve()), batch_dim).copy()


def utilisation_of(h: Any, latency_s: Any) -> Any:
    """U of the paper's product at contraction dim h taking latency_s: FLOPs over time
    over the H100's peak."""
    return 2.0 * pl.GEMM_M * pl.GEMM_N * h / (latency_s * pl.PEAK_FLOPS)


def interpolated(hs: np.ndarray, latency_s: np.ndarray) -> pl.Util:
    """U(h) from the product's latency timed at ascending h (the module's rule above)."""

    def util(h: Any) -> Any:
        hv = np.asarray(h, dtype=float)
        if np.any(hv <= 0) or np.any(hv > hs[-1]):
            raise ValueError(f"h must lie in (0, {hs[-1]:g}], the measured range")
        # np.interp holds the end value below hs[0]: constant (memory-bound) latency
        u = utilisation_of(hv, np.interp(hv, hs, latency_s))
        return float(u) if u.ndim == 0 else u

    return util


@lru_cache(maxsize=8)
def _build(path: str, batch_dim: BatchDim) -> pl.Util:
    pts = _points(path, batch_dim)
    return interpolated(pts["h"].to_numpy(float), pts["latency_s"].to_numpy(float))


def measured_utilisation(gemm_table: str | Path | None = None,
                         batch_dim: BatchDim = "k") -> pl.Util:
    """Measured U(h), vectorised like `pl.utilisation`; the table is read once per path."""
    return _build(str(Path(gemm_table or default_table()).resolve()), batch_dim)


def _figure(path: Path, h: np.ndarray, u_roof: np.ndarray, u_meas: np.ndarray,
            pts: pd.DataFrame) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = pts[pts["h"] <= h[-1]]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot(h, u_roof, label=f"roofline (pad {pl.PAD}, eta {pl.ETA_COMPUTE}/{pl.ETA_MEMORY})")
    ax.plot(h, u_meas, label="measured, latency interpolated linearly in h")
    ax.plot(pts["h"], pts["u"], "o", color="C1", ms=4, label="measured rows (k = h)")
    ax.set(xlabel="batch size h (sequences)", ylabel="U(h) (fraction of peak bf16 FLOP/s)",
           xlim=(0, h[-1] + 8), ylim=(0, 1))
    ax.set_title("PipelineRL Fig. 8 GEMM (4096 x h) x (h x 16384), bf16, H100 SXM:\n"
                 "roofline vs aiconfigurator-core measured (vLLM 0.24.0)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    save_figure(fig, path)


def rederive(out_dir: Path, gemm_table: str | Path | None = None) -> pd.DataFrame:
    """Appendix A's optimum under both U models, next to the paper's; writes the CSVs and PNG."""
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    u_meas = measured_utilisation(gemm_table)
    rows = []
    for name, util in (("roofline", pl.utilisation), (U_MODEL, u_meas)):
        cs = pl.case_study(util=util)
        rows.append({"u_model": name, **{c: cs[c] for c in (
            "speedup", "g_max", "H", "I", "U_H", "pipe_total", "conv_total")}})
    rows.append({"u_model": "paper", **PAPER})
    table = pd.DataFrame(rows, columns=["u_model", "speedup", "g_max", "H", "I", "U_H",
                                        "pipe_total", "conv_total"])
    table.to_csv(out_dir / "appendix_a.csv", index=False)
    h = np.arange(1, pl.H_MAX + 1, dtype=float)
    u_roof, u_m = pl.utilisation(h), u_meas(h)
    pd.DataFrame({"h": h.astype(int), "u_roofline": u_roof, "u_measured": u_m}).to_csv(
        out_dir / "appendix_a_u.csv", index=False)
    _figure(out_dir / "appendix_a.png", h, u_roof, u_m, measured_points(gemm_table))
    table.attrs["wall_s"] = time.perf_counter() - t0
    return table
