"""pareto.png: every configuration a plan tried, and its front, systems coloured."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.plots import save_figure
from harness.studies.plan.space import Space


def pareto_figure(space: Space, table: pd.DataFrame, front: pd.DataFrame, path: Path) -> None:
    """Objective (x) against off-policy token share (y); the front's points are
    large, edged and labelled with their max lag, the rest small and faint."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    up = space.plan.limits.objective == "throughput"
    x, xlabel = (("throughput_tok_s", "throughput (trained response tokens / s)") if up else
                 ("step_time_s", "step time: rollout-to-train-end per round (s)"))
    ok = table[table["error"].fillna("") == ""]
    systems = sorted(ok["system"].unique())
    colours = dict(zip(systems, sns.color_palette("tab10", len(systems)), strict=True))
    fig, ax = plt.subplots(figsize=(8, 5))
    for system in systems:
        part = ok[ok["system"] == system]
        ax.scatter(part[x], 100 * part["offpolicy_token_frac"], s=14, alpha=0.35,
                   color=colours[system], label=system)
    for _, row in front.iterrows():
        ax.scatter(row[x], 100 * row["offpolicy_token_frac"], s=70,
                   color=colours[row["system"]], edgecolor="black", linewidth=1.0, zorder=3)
        ax.annotate(f"lag {row['lag_max']:.0f}", (row[x], 100 * row["offpolicy_token_frac"]),
                    textcoords="offset points", xytext=(5, 4), fontsize=7)
    c, r = space.plan.cluster, space.plan.recipe
    ax.set_title(f"Plan: {c.model} on {c.gpus}x {c.gpu}, {r.workload} R={r.groups} "
                 f"K={r.group_size} U={r.update_groups}\n"
                 "configurations tried (faint) and the Pareto front (edged, max lag in steps)",
                 fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("off-policy token share (%)")
    ax.grid(alpha=0.3)
    if systems:
        ax.legend(title="system", fontsize=8, loc="best")
    save_figure(fig, path)
