"""PipelineRL's simulated comparison as a figure (cf. the paper's Fig. 5c and Fig. 6b).

Appendix A's figures (Fig. 8, Fig. 9) are the analytic model's own
(`harness.studies.analytic.pipelinerl`); this one draws the simulated runs'
summaries (a CSV of results/ will do), never running anything.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.plots import save_figure
from harness.studies.reproduce.pipelinerl.runs import G_VALUES


def figure(sim: pd.DataFrame, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    colors = ["#dd8452"] + ["#4c72b0"] * len(G_VALUES)
    names = [s.replace("conventional ", "conventional\n") for s in sim["system"]]
    axes[0].bar(names, sim["samples_per_s"], color=colors)
    axes[0].set_ylabel("sample throughput (samples/s)")
    axes[0].set_title("sample throughput (cf. Fig. 5c)", fontsize=10)
    # Dots, not bars: every ESS lies within a few hundredths of 1, so the axis is cut
    # to show them apart, and a bar on a cut axis (it started at 0.90) draws a length
    # that means nothing. Each dot carries its value.
    ess = sim["ess_mean"].to_numpy(dtype=float)
    axes[1].scatter(names, ess, s=60, color=colors, zorder=3)
    for x, value in enumerate(ess):
        axes[1].annotate(f"{value:.3f}", (x, value), xytext=(0, 7), textcoords="offset points",
                         ha="center", fontsize=8)
    axes[1].set_ylim(min(0.9, float(ess.min()) - 0.01), 1.005)  # room for the top label
    axes[1].set_xlim(-0.5, len(names) - 0.5)
    axes[1].set_ylabel("ESS (fraction of the batch; cut axis)")
    axes[1].set_title("mean effective sample size per step (cf. Fig. 6b)", fontsize=10)
    for ax in axes:
        ax.tick_params(axis="x", labelsize=8)
        ax.set_xlabel("system (G: optimizer steps per rollout)")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Simulated PipelineRL vs conventional RL (Qwen2.5-7B, 128 H100, 1024 samples "
                 "per step)", fontsize=10, y=1.03)
    save_figure(fig, path)
