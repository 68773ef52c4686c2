"""The step times of verl's README beside the simulated ones, one bar pair a run."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.plots import save_figure
from harness.studies.reproduce.verl_async.claims import ASYNC, COLOCATE

ORDER = [f"colocate {n}" for n in COLOCATE] + list(ASYNC)


def published(label: str) -> tuple[float, float]:
    """The README's step for a run: (low, high), high above low where it gives two."""
    if label.startswith("colocate"):
        step = COLOCATE[int(label.split()[1])]["step"]
        return step, step
    return ASYNC[label][0]


def figure(sim: pd.DataFrame, path: Path) -> None:
    """Grouped bars: the README's step (its two values as a whisker where it gives two)
    and each reading's simulated step."""
    import matplotlib.pyplot as plt
    import numpy as np

    readings = list(dict.fromkeys(sim["reading"]))
    x = np.arange(len(ORDER))
    width = 0.8 / (1 + len(readings))
    fig, ax = plt.subplots(figsize=(11, 4.2))
    lo = np.array([published(label)[0] for label in ORDER])
    hi = np.array([published(label)[1] for label in ORDER])
    ax.bar(x - 0.4 + width / 2, hi, width, color="#444444", label="verl README (H20)")
    ax.errorbar(x - 0.4 + width / 2, lo, yerr=[np.zeros_like(lo), hi - lo], fmt="none",
                ecolor="#bbbbbb", capsize=2)
    colours = ["#4c72b0", "#dd8452", "#55a868"]
    for i, reading in enumerate(readings):
        by = sim[sim["reading"] == reading].set_index("label")
        ax.bar(x - 0.4 + width * (i + 1.5), [by.loc[label, "step_s"] for label in ORDER],
               width, color=colours[i % len(colours)], label=f"simulated, {reading}")
    ax.set_xticks(x, [label.replace("fully async ", "async ") for label in ORDER],
                  rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("seconds a step (512 prompts x 16)")
    ax.set_title("verl fully-async, Qwen2.5-Math-7B on H20: step times, README vs simulator")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    save_figure(fig, path)
