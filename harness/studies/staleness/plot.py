"""The staleness study's figure: throughput against staleness, one panel per split.

Top row: trained tokens per second (mean of the seeds, whiskers their least and
most) against the worst max lag of any seed; bottom row: against the mean lag.
One colour and marker per system, its settings joined in the order of its knob;
the dashed line is the split's Pareto frontier (no setting trains more at a lag
no higher). A colocated system (verl) uses all the GPUs and so appears in every
panel.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.plots import save_figure
from harness.studies.staleness.summary import _in_split, _pareto, _splits, summarise

MARKERS = "osD^v<>PXph*d8H<>"
TICKS = [0, 1, 2, 4, 8, 16, 32]


def _style(systems: list[str]) -> dict[str, tuple[object, str]]:
    """A colour and a marker per system, stable in the order given."""
    import matplotlib

    colours = matplotlib.colormaps["tab20"].colors
    return {s: (colours[i % len(colours)], MARKERS[i % len(MARKERS)])
            for i, s in enumerate(systems)}


def _frontier(ax: object, pts: pd.DataFrame, x: str, right: float) -> None:
    """The most throughput at a lag no higher than x: a staircase up to the panel's edge."""
    front = pts[_pareto(pts, x, "trained_tokens_per_s")].sort_values(x)
    ys = list(front["trained_tokens_per_s"] / 1e3)
    xs, ys = [*front[x], right], [*ys, ys[-1]]
    ax.step(xs, ys, where="post", color="k", ls="--", lw=1.2,  # type: ignore[attr-defined]
            zorder=1, label="Pareto frontier")


def draw(df: pd.DataFrame, path: Path) -> None:
    """Write the figure (see the module's docstring) to `path`."""
    import matplotlib.pyplot as plt

    with plt.rc_context({"font.size": 12}):  # read at README width: about half size
        _draw(df, path)


def _draw(df: pd.DataFrame, path: Path) -> None:
    import matplotlib.pyplot as plt

    summary = summarise(df)
    splits = _splits(summary)
    style = _style(list(dict.fromkeys(summary["system"])))
    coloc = set(summary.loc[summary["split"].str.endswith("coloc"), "system"])
    fig, axes = plt.subplots(2, len(splits), figsize=(4.6 * len(splits), 9.4),
                             squeeze=False, sharey=True)
    for col, split in enumerate(splits):
        pts = _in_split(summary, split)
        for row, (x, label) in enumerate((("lag_max", "max lag (steps, worst seed)"),
                                          ("lag_mean", "mean lag (steps)"))):
            ax = axes[row, col]
            for system, sub in pts.groupby("system", sort=False):
                colour, marker = style[str(system)]
                sub = sub.sort_values("value")
                y = sub["trained_tokens_per_s"] / 1e3
                err = [y - sub["trained_tokens_per_s_min"] / 1e3,
                       sub["trained_tokens_per_s_max"] / 1e3 - y]
                name = f"{system} (colocated, all GPUs)" if system in coloc else str(system)
                ax.errorbar(sub[x], y, yerr=err, color=colour, marker=marker, ms=7, lw=1.0,
                            elinewidth=0.9, capsize=2, label=name, zorder=2)
            right = max(40.0, float(summary[x].max()) * 1.1)
            _frontier(ax, pts, x, right)
            ax.set_xscale("symlog", linthresh=1, linscale=0.6)
            ax.set_xticks(TICKS, [str(t) for t in TICKS])
            ax.set_xlim(-0.3, right)
            ax.set_xlabel(label)
            ax.grid(alpha=0.3)
            if col == 0:
                ax.set_ylabel("trained tokens/s (thousands)")
        gpus = split.split("+")
        axes[0, col].set_title(f"{gpus[0]} engine + {gpus[1]} trainer GPUs")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    seen = dict(zip(labels, handles, strict=True))
    fig.legend(seen.values(), seen.keys(), loc="lower center", ncol=4, fontsize=11,
               frameon=False, bbox_to_anchor=(0.5, -0.01))
    first = df.iloc[0]
    fig.suptitle(f"What-if: throughput against staleness ({first['model']}, "
                 f"{first['workload']}, U = {first['update_groups']} groups x "
                 f"{first['group_size']} a step;\nsteady window, {df['seed'].nunique()} seeds: "
                 "mean, whiskers least to most)", fontsize=12)
    fig.tight_layout(rect=(0, 0.15, 1, 0.97))
    save_figure(fig, path)
