"""The scale table as a figure (scale.png): each source's rows as points on one log axis of
predicted over measured, held-out rows blue and fitted rows orange on top, so that a source
whose good numbers are its fit's shows at a glance."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pandas as pd

from harness.core.plots import save_figure
from harness.studies.validate.scale.rows import shorten


def figure(table: pd.DataFrame, path: Path) -> None:
    """One row of points per source (top to bottom in the table's order), x = predicted /
    measured on a log axis, a band at ±25%."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = table.dropna(subset=["error"])
    names = list(dict.fromkeys(rows["source"]))
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(names) + 1.6))
    rng = np.random.default_rng(0)  # jitter only: the same figure every time
    for i, name in enumerate(names):
        g = rows[rows["source"] == name]
        for fitted, colour, label in ((False, "C0", "held-out rows"),
                                      (True, "C1", "fitted rows")):
            part = g[g["fitted"] == fitted]
            y = i + rng.uniform(-0.25, 0.25, len(part))
            ax.scatter(1 + part["error"], y, s=6, alpha=0.5, color=colour,
                       label=label if i == 0 else None)
        held = g.loc[~g["fitted"], "error"]
        if len(held):
            ax.plot([1 + held.median()] * 2, [i - 0.35, i + 0.35], "k-", lw=2,
                    label="held-out median" if i == 0 else None)
    ax.axvspan(0.75, 1.25, color="green", alpha=0.12, label="±25%")
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set(xscale="log", yticks=range(len(names)), ylim=(len(names) - 0.5, -0.5),
           xlabel="predicted / measured (log)")
    short, legend = shorten(names)
    ax.set_yticklabels([short[n] for n in names], fontsize=8)
    readings = textwrap.fill("   ".join(legend), 120) if legend else ""
    ax.set_title("Every external GPU measurement against the simulator"
                 + (f"\n{readings}" if readings else ""), fontsize=8)
    ax.grid(alpha=0.3, axis="x", which="both")
    ax.legend(fontsize=7, loc="lower right")
    save_figure(fig, path)
