"""The silicon comparison as figures: simulated against measured TPOT (silicon.png), and the
signed errors per prefill-load bin, one box per backend (silicon_bins.png): the figure that
shows where errors offset, which one pooled number hides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.core.plots import save_figure
from harness.studies.validate.gpu.silicon.bins import LOAD_BINS, MIN_N, MODELS, TARGET, load_bin


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def scatter_figure(df: pd.DataFrame, path: Path) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, marker in zip(MODELS, ("o", "x"), strict=True):
        ax.scatter(df["measured_ms"], df[f"{name}_tpot_ms"], marker=marker, s=16, alpha=0.7,
                   label=f"{name} step model")
    lo, hi = (float(df["measured_ms"].min()) / 2, float(df["measured_ms"].max()) * 2) \
        if len(df) else (1.0, 100.0)
    x = np.geomspace(lo, hi, 50)
    ax.plot(x, x, "k-", lw=1, label="simulated = measured")
    ax.fill_between(x, 0.8 * x, 1.2 * x, color="grey", alpha=0.2, label="±20%")
    ax.set(xscale="log", yscale="log", xlabel="measured TPOT (ms, silicon sample)",
           ylabel="simulated TPOT: decode step + prefill share (ms)")
    kinds = ", ".join(sorted(set(df["arch"]) | set(df["precision"]))) if len(df) else "none"
    ax.set_title(f"Simulated TPOT with prefill share (b/osl prefills per step)\n"
                 f"vs measured TPOT, {kinds}, {len(df)} rows", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    save_figure(fig, path)


def bins_figure(df: pd.DataFrame, path: Path, model: str = "kernels") -> None:
    """Signed relative error of TPOT (with the prefill share) and of TTFT, per prefill-load
    bin, one box per backend; the band is the target, n under each box."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    labels = [lb for _, lb in LOAD_BINS]
    loads = df["prefill_tok_per_step"].map(load_bin) if len(df) else pd.Series(dtype=object)
    backends = sorted(df["framework"].unique()) if len(df) else []
    width = 0.8 / max(1, len(backends))
    for ax, (col, what) in zip(axes, ((f"{model}_tpot_err", "TPOT, decode + prefill share"),
                                      (f"{model}_ttft_err", "TTFT, wave of batch prompts")),
                               strict=True):
        ax.axhspan(-100 * TARGET, 100 * TARGET, color="green", alpha=0.12,
                   label=f"±{TARGET:.0%} target")
        ax.axhline(0, color="k", lw=0.8)
        for j, fw in enumerate(backends):
            pos, data, counts = [], [], []
            for i, lb in enumerate(labels):
                err = df.loc[(loads == lb) & (df["framework"] == fw), col].dropna()
                if len(err):
                    pos.append(i + (j - (len(backends) - 1) / 2) * width)
                    data.append(100 * err.to_numpy())
                    counts.append(len(err))
            if not data:
                continue
            box = ax.boxplot(data, positions=pos, widths=width * 0.9, patch_artist=True,
                             showfliers=False, manage_ticks=False)
            for patch in box["boxes"]:
                patch.set(facecolor=f"C{j}", alpha=0.6)
            ax.plot([], [], "s", color=f"C{j}", alpha=0.6, label=fw)
            for p, n in zip(pos, counts, strict=True):
                ax.text(p, 0.01, f"{n}" + ("" if n >= MIN_N else "*"), ha="center",
                        va="bottom", fontsize=7, transform=ax.get_xaxis_transform())
        ax.set_xticks(range(len(labels)), labels)
        ax.set(xlabel="prompt tokens prefilled per decode step (batch * isl / osl)",
               ylabel="signed error, simulated vs measured (%)", title=what)
        if "ttft" in col:  # errors of several hundred per cent beside ones of a few
            ax.set_yscale("symlog", linthresh=100, linscale=2)
            ticks = [-100, -50, 0, 50, 100, 200, 500, 1000, 2000]
            ax.set_yticks(ticks, [f"{t:+d}" if t else "0" for t in ticks])
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8, loc="upper left", ncol=3)
    fig.suptitle(f"{model} step model against {len(df)} measured serving runs, per bin "
                 f"(rows per box at the foot; * fewer than {MIN_N}: not judged)", fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)
