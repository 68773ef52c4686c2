"""APRIL's Table 1 as a figure: simulated throughput beside the paper's.

It reads the runs' rows only (a CSV of results/ will do), never running anything.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.plots import save_figure
from harness.studies.reproduce.april.claims import TABLE1
from harness.studies.reproduce.april.runs import DATASETS, steady

DATASET_LABELS = {"dapo-math-17k": "DAPO-Math-17k", "deepscaler": "DeepScaleR",
                  "deepmath-103k": "DeepMath-103k"}
ALGO_LABELS = {"grpo": "GRPO", "dapo": "DAPO (dynamic sampling)"}
MODEL_LABELS = {"qwen3-4b": "Qwen3-4B", "qwen3-8b": "Qwen3-8B"}


def figure(df: pd.DataFrame, path: Path) -> None:
    """Table 1 as bars: simulated throughput (tokens generated in the round, the
    repository's `tokens_throughput`), baseline and APRIL, per algorithm, model
    and dataset, with the paper's values as black ticks. The datasets are named in
    full so that DAPO the algorithm is not read as DAPO-Math-17k the dataset; the
    legend sits above the panels, clear of the bars."""
    import matplotlib.pyplot as plt
    import numpy as np

    m = steady(df)["throughput"]
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.4), sharey=True)
    for ax, (algo, model) in zip(axes, TABLE1, strict=True):
        x = np.arange(len(DATASETS))
        for i, method in enumerate(("baseline", "april")):
            sim = [m.loc[(algo, model, d, method)] for d in DATASETS]
            paper = [TABLE1[(algo, model)][j][i] for j in range(len(DATASETS))]
            color = "#8c8c8c" if method == "baseline" else "#dd8452"
            label = "APRIL, simulated" if method == "april" else "baseline, simulated"
            ax.bar(x + (i - 0.5) * 0.38, sim, 0.38, color=color, label=label)
            ax.scatter(x + (i - 0.5) * 0.38, paper, marker="_", s=300, color="k",
                       label="paper (Table 1)" if i == 0 else None, zorder=3)
        ax.set_xticks(x, [DATASET_LABELS[d] for d in DATASETS], fontsize=8)
        ax.set_xlabel("dataset")
        ax.set_title(f"{ALGO_LABELS[algo]}, {MODEL_LABELS[model]}", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("rollout throughput (tokens generated/s, 8 GPUs)")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=8,
               bbox_to_anchor=(0.5, 1.0), frameon=False)
    fig.suptitle("Simulated APRIL Table 1: rollout throughput (tokens generated in the round "
                 "over its wall time), baseline vs APRIL, per algorithm and model (paper: "
                 "black ticks)", fontsize=10, y=1.12)
    save_figure(fig, path)
