"""pareto.png: every configuration a plan tried, and its front, systems coloured.

The x axis is sized to the front and the bulk of what was tried, not to the
slowest outlier: a plan's worst configurations can be ten times slower than
its best, and a linear axis over all of them squeezes the front into a sliver.
Points beyond the axis are drawn on its edge, and a note counts them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from harness.core.plots import save_figure
from harness.studies.plan.space import Space

MARKERS = "osD^vPX*<>ph"  # one per system, so systems on top of each other stay apart


def x_window(values: np.ndarray, front: np.ndarray) -> tuple[float, float]:
    """The x range shown: the front and the middle 80% of all points, padded by 8%."""
    lo = min(float(front.min()), float(np.quantile(values, 0.1)))
    hi = max(float(front.max()), float(np.quantile(values, 0.9)))
    pad = 0.08 * (hi - lo) if hi > lo else 0.05 * abs(hi) or 1.0
    return max(lo - pad, float(values.min()) - pad), min(hi + pad, float(values.max()) + pad)


def pareto_figure(space: Space, table: pd.DataFrame, front: pd.DataFrame, path: Path) -> None:
    """Objective (x) against off-policy token share (y); the front's points are
    large, edged and labelled with their max lag (x N when N configurations share
    the point; the trained response length against the workload's when biased),
    the rest small and faint."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from harness.studies.plan.bias import biased

    up = space.plan.limits.objective == "throughput"
    x, xlabel = (("trained_tokens_per_s", "trained response tokens / s (steady window)")
                 if up else ("step_s", "seconds per optimizer step (steady window)"))
    ok = table[table["error"].fillna("") == ""]
    systems = sorted(ok["system"].unique())
    colours = dict(zip(systems, sns.color_palette("tab10", len(systems)), strict=True))
    marker = {s: MARKERS[i % len(MARKERS)] for i, s in enumerate(systems)}
    fig, ax = plt.subplots(figsize=(9, 5.5))
    values = ok[x].to_numpy(float)
    lo, hi = x_window(values, front[x].to_numpy(float) if len(front) else values)
    for system in systems:
        part = ok[ok["system"] == system]
        ax.scatter(part[x].clip(lo, hi), 100 * part["offpolicy_token_frac"], s=18, alpha=0.4,
                   color=colours[system], marker=marker[system], label=system)
    _edges(ax, values, lo, hi)
    for i, (_, row) in enumerate(front.sort_values(x).iterrows()):
        y = 100 * row["offpolicy_token_frac"]
        ax.scatter(row[x], y, s=80, color=colours[row["system"]], marker=marker[row["system"]],
                   edgecolor="black", linewidth=1.0, zorder=3)
        same = int(row.get("same", 0) or 0)
        label = f"lag {row['lag_max']:.0f}" + (f" x{same + 1}" if same else "")
        share = row.get("response_share", float("nan"))
        if biased(share):
            label += f", resp {100 * (share - 1):+.0f}%"
        ax.annotate(label, (row[x], y), textcoords="offset points", fontsize=7,
                    xytext=(6, 6 if i % 2 == 0 else -11))  # alternate: neighbours apart
    c, r = space.plan.cluster, space.plan.recipe
    ax.set_title(f"Plan: {c.model} on {c.gpus}x {c.gpu}, {r.workload} R={r.groups} "
                 f"K={r.group_size} U={r.update_groups}\n"
                 "configurations tried (faint) and the Pareto front (edged, max lag in steps)",
                 fontsize=10)
    ax.set_xlim(lo, hi)
    top = float(100 * ok["offpolicy_token_frac"].max()) if len(ok) else 1.0
    ax.set_ylim(-0.04 * max(top, 1.0), 1.08 * max(top, 1.0))  # 0% clear of the axis
    ax.set_xlabel(xlabel)
    ax.set_ylabel("off-policy token share (%)")
    ax.grid(alpha=0.3)
    if systems:  # beside the axes: inside, "best" placed it over the front's best points
        ax.legend(title="system", fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  borderaxespad=0.0)
    save_figure(fig, path)


def _edges(ax: object, values: np.ndarray, lo: float, hi: float) -> None:
    """A note at each edge the axis cuts: how many configurations lie beyond it."""
    for count, where, text, align in ((int((values < lo).sum()), 0.01, "\u2190 {} more", "left"),
                                      (int((values > hi).sum()), 0.99, "{} more \u2192",
                                       "right")):
        if count:
            ax.text(where, 0.97, text.format(count), transform=ax.transAxes,  # type: ignore[attr-defined]
                    fontsize=8, ha=align, va="top", color="dimgray")
