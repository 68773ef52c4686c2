"""AReaL's two figures redrawn beside the simulator's: the scaling figure's six panels
(published values read off the image, with their reading error, against each reading of
verl's config) and Fig. 7's staleness bars."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.plots import save_figure
from harness.studies.reproduce.areal import readings
from harness.studies.reproduce.areal.runs import NO_VERL, PANELS, READINGS, eta_label, label

COLOURS = {"areal": "#1f77b4", "verl": "#ff7f0e"}
STYLES = {READINGS[0]: "--", READINGS[1]: ":"}


def scaling_figure(sim: pd.DataFrame, path: Path) -> None:
    """One panel a (model, context): published lines with error bars, simulated dashed."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(15, 7.5))
    for ax, (model, ctx) in zip(axes.flat, PANELS, strict=True):  # the source's layout
        sizes = PANELS[(model, ctx)]
        for system in ("verl", "areal"):
            if system == "verl" and (model, ctx) in NO_VERL:
                continue
            pub = readings.scaling(model, ctx, system)
            err = [readings.error(model, ctx, system, n) * pub[n] for n in sizes]
            ax.errorbar(sizes, [pub[n] for n in sizes], yerr=err, color=COLOURS[system],
                        marker="o", capsize=3, label=f"{system}, published (read off)")
            for reading in READINGS:
                by = sim[sim["reading"] == reading].set_index("label")["throughput"]
                ax.plot(sizes, [by[label(system, model, ctx, n)] for n in sizes],
                        STYLES[reading], color=COLOURS[system], marker="x",
                        label=f"{system}, simulated: {reading}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sizes, [str(n) for n in sizes])
        ax.set_title(f"{model}, context {ctx}", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("effective tokens/s")
    axes[1, 0].set_ylabel("effective tokens/s")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("AReaL against verl v0.3 (H800): published (read off the figure, +-5-8%) "
                 "and simulated; verl's smallest-GPU rows are the fit's", fontsize=10)
    save_figure(fig, path)


def staleness_figure(sim: pd.DataFrame, path: Path) -> None:
    """Fig. 7's bars beside the simulated throughput; staleness 0 is the fit's."""
    import matplotlib.pyplot as plt
    import numpy as np

    etas = [eta_label(e) for e in readings.STALENESS]
    by = sim.set_index("eta")["throughput"]
    y = np.arange(len(etas))
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.barh(y - 0.2, list(readings.STALENESS.values()), 0.4, color="#444444",
            label="AReaL blog Fig. 7")
    ax.barh(y + 0.2, [by[e] / 1000 for e in etas], 0.4, color="#1f77b4",
            label="simulated (staleness 0 fitted)")
    ax.set_yticks(y, etas)
    ax.invert_yaxis()
    ax.set_ylabel("maximum staleness")
    ax.set_xlabel("effective training throughput (k tokens/s)")
    ax.set_title("DeepSeek-R1-Distill-Qwen-1.5B, 8k answers, 128 H800", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(fig, path)
