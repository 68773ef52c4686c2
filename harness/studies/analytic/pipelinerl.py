"""PipelineRL Appendix A: analytical throughput of PipelineRL vs conventional RL at equal max lag.

Units follow the paper: one *flash* is F_gen / M, the time an ideal GPU needs for one token's
forward pass, so throughputs are in tokens per flash and do not depend on model or GPU size.

What is ours (the paper only shows a measured table, Fig. 8): the utilisation model U(h), a
roofline of the paper's benchmark GEMM (4096, h) x (h, 16384) in bf16 on an H100 times stated
achievable-efficiency factors (the reproduction uses a measured U(h) instead: see
`harness.studies.validate.gpu.appendix_a`). The training cost tau is the paper's own: A.4 prints
"r_conv^train = 26.02" for N = 128, and Eq. (15) reads "r_conv^train = N / tau", so
tau = 128 / 26.02 = 4.919 flashes per trained token (`TAU`). The same A.4 line for PipelineRL,
"r_pipeline^train = 17.08" with I = 44, agrees through Eq. (18): 84 / 17.08 = 4.918. That
26.02 is therefore an input of the model, not a prediction; everything else (1.57x,
g_max ~133, H=192, I=44, 16.9 vs 10.7 tokens/flash) is predicted from tau and U(h).

Reading of the notation (paper, above A.1): S = B*G sequences per conventional RL step, so a
conventional round makes G = S/B optimizer steps and its max lag is G - 1 optimizer steps (the
paper writes "S - 1"; only G - 1 steps matches the unit of g_max below). Lengths are uniform on
1..L, so h(l) = S (L - l + 1) / L sequences decode their l-th token, L_bar = (L + 1) / 2 and
K = S * L_bar. PipelineRL's g_max = ceil(H I L / (L_bar B)): the text shows "HIL/L", but it says
"HIL/L_bar sequences", and only L_bar gives the paper's g_max ~133 at H=192, I=44, B=128.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from harness.core.plots import save_figure

# H100 SXM datasheet peaks and the paper's benchmark GEMM (4096, h) x (h, 16384), bf16.
PEAK_FLOPS = 989.4e12  # dense bf16 FLOP/s
HBM_BYTES_PER_S = 3.35e12
GEMM_M, GEMM_N, BYTES_PER_ELEM = 4096, 16384, 2
# Assumptions (stated, not fitted): cuBLAS reaches ~75% of peak tensor FLOP/s on large bf16
# GEMMs and ~80% of peak HBM bandwidth in the memory-bound regime (~90% for streaming copies,
# less for a GEMM's epilogue stores, wave quantization and launch gaps).
ETA_COMPUTE = 0.75
ETA_MEMORY = 0.80
PAD = 64  # kernels tile the contraction dim h in steps of 64: padded work costs time, not credit
# Case study (A.4): N=128 H100s, B=N, uniform lengths 1..L, L = the paper's 32k max length.
N_GPUS, BATCH, MAX_LEN, H_MAX = 128, 128, 32768, 512
# The training cost, pinned by the paper (Appendix A.4, "r_conv^train = 26.02", and Eq. (15),
# r_conv^train = N / tau): flashes one GPU spends per trained token. Were it 3 forwards of
# FLOPs (forward + backward), this is a training MFU of 3 / 4.919 = 0.61.
CONV_TRAIN_PAPER = 26.02
TAU = N_GPUS / CONV_TRAIN_PAPER

Util = Callable[[Any], Any]


def utilisation(h: Any, *, pad: int = PAD, eta_compute: float = ETA_COMPUTE,
                eta_memory: float = ETA_MEMORY) -> Any:
    """U(h): useful FLOP/s of the (4096, h) x (h, 16384) bf16 GEMM as a fraction of peak.

    Why a roofline: in decoding, batch h multiplies a fixed weight-sized operand, so for small
    h the kernel is bound by moving that operand (time ~ constant, U ~ linear in h) and beyond
    the ridge point (PEAK/HBM ~ 295 FLOP/byte, reached near h ~ 300) by the tensor cores. The
    time is the larger of the two bounds at their achievable rates; h is first padded up to a
    multiple of `pad` as the kernel's tiles would. Accepts a scalar (returns float) or array.
    """
    hv = np.asarray(h, dtype=float)
    if np.any(hv <= 0):
        raise ValueError("batch size h must be positive")
    hp = np.ceil(hv / pad) * pad if pad > 1 else hv
    t_compute = 2.0 * GEMM_M * GEMM_N * hp / (eta_compute * PEAK_FLOPS)
    moved = BYTES_PER_ELEM * (GEMM_M * hp + hp * GEMM_N + GEMM_M * GEMM_N)
    t_memory = moved / (eta_memory * HBM_BYTES_PER_S)
    u = 2.0 * GEMM_M * GEMM_N * hv / (PEAK_FLOPS * np.maximum(t_compute, t_memory))
    return float(u) if u.ndim == 0 else u


def mean_length(L: int) -> float:
    """L_bar of the uniform distribution on 1..L."""
    return (L + 1) / 2


def running(S: float, L: int) -> np.ndarray:
    """h(l), l = 1..L: expected sequences decoding their l-th token (those of length >= l)."""
    steps = np.arange(1, L + 1, dtype=float)
    return S * (L - steps + 1) / L


def r_conv(N: int, B: int, S: float, L: int, tau: float,
           util: Util = utilisation) -> dict[str, float]:
    """Conventional RL tokens/flash (Eqs. 13-15); generation and training run one after another.

    Each GPU decodes h(l)/N sequences at step l, which takes (h/N) / U(h/N) flashes (Eq. 11);
    the shrinking batch is why generation efficiency falls as sequences finish.
    """
    K = S * mean_length(L)
    per_gpu = running(S, L) / N
    gen = K / float(np.sum(per_gpu / util(per_gpu)))
    train = N / tau
    return {"gen": gen, "train": train, "total": 1.0 / (1.0 / gen + 1.0 / train),
            "g_max": S / B - 1}


def g_max_pipeline(H: Any, I: Any, L: int, B: int) -> Any:  # noqa: E741
    """ceil(H I L / (L_bar B)) in exact integer arithmetic: the optimizer steps taken while the
    I generation GPUs at batch H produce one longest (L-token) sequence's worth of samples."""
    num = 2 * np.asarray(H, dtype=np.int64) * np.asarray(I, dtype=np.int64) * L
    g = -(-num // ((L + 1) * B))
    return int(g) if g.ndim == 0 else g


def r_pipeline(N: int, I: int, H: int, tau: float, L: int, B: int,  # noqa: E741
               util: Util = utilisation) -> dict[str, float]:
    """PipelineRL tokens/flash (Eqs. 16-18): I GPUs always decode at batch H while N - I train,
    so the throughput is the slower of the two concurrent stages."""
    gen = float(util(H)) * I
    train = (N - I) / tau
    return {"gen": gen, "train": train, "total": min(gen, train),
            "g_max": g_max_pipeline(H, I, L, B)}


def search(N: int = N_GPUS, B: int = BATCH, L: int = MAX_LEN, tau: float = TAU,
           h_max: int = H_MAX, util: Util = utilisation) -> dict[str, np.ndarray]:
    """All (H, I), H = 1..h_max, I = 1..N-1; for each lag g = 1..max g_max: the best PipelineRL
    config with g_max <= g, and conventional RL with max lag g (G = g + 1, S = B G).

    Returns arrays indexed like `g`, plus the raw per-config arrays (cfg_*) for plotting.
    """
    Hs, Is = np.meshgrid(np.arange(1, h_max + 1), np.arange(1, N), indexing="ij")
    Hs, Is = Hs.ravel(), Is.ravel()
    gen = util(Hs.astype(float)) * Is
    train = (N - Is) / tau
    total = np.minimum(gen, train)
    gm = g_max_pipeline(Hs, Is, L, B)
    g = np.arange(1, int(gm.max()) + 1)
    order = np.lexsort((-total, gm))  # by g_max, best first within each g_max
    first = order[np.r_[True, np.diff(gm[order]) != 0]]
    best_at = dict(zip(gm[first].tolist(), first.tolist(), strict=True))
    idx = np.empty(len(g), dtype=np.int64)
    cur = -1
    for k, gv in enumerate(g):
        j = best_at.get(int(gv), -1)
        if j >= 0 and (cur < 0 or total[j] > total[cur]):
            cur = j
        idx[k] = cur
    conv = [r_conv(N, B, B * (gv + 1), L, tau, util) for gv in g]
    out = {"g": g, "H": Hs[idx], "I": Is[idx], "pipe_gen": gen[idx],
           "pipe_train": train[idx], "pipe_total": total[idx],
           "conv_gen": np.array([c["gen"] for c in conv]),
           "conv_train": np.array([c["train"] for c in conv]),
           "conv_total": np.array([c["total"] for c in conv]),
           "cfg_g_max": gm, "cfg_total": total}
    out["speedup"] = out["pipe_total"] / out["conv_total"]
    return out


def case_study(N: int = N_GPUS, B: int = BATCH, L: int = MAX_LEN, tau: float = TAU,
               h_max: int = H_MAX, util: Util = utilisation,
               res: dict[str, np.ndarray] | None = None) -> dict[str, float]:
    """Appendix A.4: the lag at which PipelineRL's advantage peaks, and both systems there."""
    res = search(N, B, L, tau, h_max, util) if res is None else res
    k = int(np.argmax(res["speedup"]))
    return {"speedup": float(res["speedup"][k]), "g_max": int(res["g"][k]),
            "H": int(res["H"][k]), "I": int(res["I"][k]),
            "pipe_gen": float(res["pipe_gen"][k]), "pipe_train": float(res["pipe_train"][k]),
            "pipe_total": float(res["pipe_total"][k]),
            "conv_gen": float(res["conv_gen"][k]), "conv_train": float(res["conv_train"][k]),
            "conv_total": float(res["conv_total"][k]), "conv_G": int(res["g"][k]) + 1,
            "tau": tau, "U_H": float(util(float(res["H"][k]))), "N": N, "B": B, "L": L}


def figure8(path: str | os.PathLike[str], h_max: int = H_MAX) -> None:
    """U(h) of our roofline model (cf. the paper's measured Fig. 8), with and without padding."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    h = np.arange(1, h_max + 1, dtype=float)
    fig, ax = plt.subplots(figsize=(5, 3.4))
    ax.plot(h, utilisation(h), label=f"roofline, h padded to {PAD}")
    ax.plot(h, utilisation(h, pad=1), "--", lw=1, label="roofline, no padding")
    ax.set(xlabel="batch size h (sequences)", ylabel="U(h) (fraction of peak bf16 FLOP/s)",
           ylim=(0, 1))
    ax.set_title("Modelled PipelineRL Fig. 8: H100 GEMM utilisation\n"
                 "(4096 x h) x (h x 16384), bf16, roofline", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    save_figure(fig, path)


def figure9(path: str | os.PathLike[str], res: dict[str, np.ndarray] | None = None) -> None:
    """Throughput vs max lag g_max (cf. the paper's Fig. 9): every (H, I) PipelineRL config,
    the best PipelineRL at each lag, and conventional RL with the same max lag."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = search() if res is None else res
    cs = case_study(res=res)
    fig, ax = plt.subplots(figsize=(6, 3.8))
    ax.scatter(res["cfg_g_max"], res["cfg_total"], s=1, c="0.8", rasterized=True,
               label="PipelineRL, all (H, I)")
    ax.plot(res["g"], res["pipe_total"], label="PipelineRL, best at lag <= g_max")
    ax.plot(res["g"], res["conv_total"], label="Conventional RL (G = g_max + 1)")
    ax.axvline(cs["g_max"], color="k", lw=0.7, ls=":")
    ax.annotate(f"{cs['speedup']:.2f}x at g_max={cs['g_max']}\n(H={cs['H']}, I={cs['I']})",
                (cs["g_max"], cs["pipe_total"]), xytext=(8, -30), textcoords="offset points")
    ax.set(xscale="log", xlabel="max lag g_max (optimizer steps)",
           ylabel="throughput (tokens / flash)")
    ax.set_title(f"Analytic PipelineRL Fig. 9 (Appendix A): throughput against max lag\n"
                 f"N={cs['N']} H100, B={cs['B']}, L={cs['L']}, tau={cs['tau']:.2f}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, fontsize=8,
              frameon=False)  # below the axes: the grey cloud fills the lower right
    save_figure(fig, path)
