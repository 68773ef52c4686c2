"""RolloutPipe's figures and table, drawn in the manner of the paper (Fig. 4, Fig. 5,
Table 1), and the frontier what-if's figure.

They read the grid's rows only (a CSV of results/ will do), never run anything,
so a figure can be redrawn or checked without simulating. CGP+FGD appears once per
reading of FGD (cap, priority: see systems/cgp_fgd.py): the figures draw each as its
own series; Table 1 shows the cap reading, the paper's three columns.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from harness.core.plots import save_figure
from harness.studies.reproduce.rolloutpipe.runs import SYSTEMS

PRIORITY = "cgp-fgd priority"  # CGP+FGD in the priority reading, as a series of its own
SERIES = (*SYSTEMS, PRIORITY)
LABELS = {"slime": "Slime", "cgp": "CGP", "cgp-fgd": "CGP+FGD (cap)",
          PRIORITY: "CGP+FGD (priority)"}
COLORS = {"slime": "#8c8c8c", "cgp": "#4c72b0", "cgp-fgd": "#dd8452", PRIORITY: "#55a868"}


def by_series(df: pd.DataFrame) -> pd.DataFrame:
    """The grid with CGP+FGD's priority-reading rows under a system name of their own
    (a CSV without a reading column has the cap reading only)."""
    if "reading" not in df:
        return df
    return df.assign(system=df["system"].where(df["reading"] != "priority", PRIORITY))


def present(df: pd.DataFrame) -> list[str]:
    """The series the grid has, in drawing order."""
    have = set(df["system"])
    return [s for s in SERIES if s in have]


def figure4(df: pd.DataFrame, path: Path) -> None:
    """Rollout-to-train-end bars (four-round mean, sample std error bars) with the
    % change of CGP+FGD against Slime above each CGP+FGD bar (above its error bar, so
    the two never meet; the title says what the label is). The paper's three bars,
    CGP+FGD in the cap reading: the priority reading's bars are CGP's on this engine
    (it admits as CGP does; Fig. 5 and the claims table show it)."""
    df = by_series(df)
    df = df[df["system"] != PRIORITY]
    series = present(df)
    workloads = list(dict.fromkeys(df["workload"]))
    groups = sorted(df["groups"].unique())
    stats = df.groupby(["workload", "groups", "system"])["rollout_to_train_end_s"].agg(
        ["mean", "std"])
    fig, axes = plt.subplots(1, len(workloads), figsize=(4 * len(workloads), 3.4), sharey=True)
    width = 0.81 / len(series)  # 0.27 for the three series
    top = float((stats["mean"] + stats["std"].fillna(0)).max())
    for ax, w in zip(np.atleast_1d(axes), workloads, strict=True):
        x = np.arange(len(groups))
        for i, sys in enumerate(series):
            mean = [stats.loc[(w, r, sys), "mean"] for r in groups]
            std = [stats.loc[(w, r, sys), "std"] for r in groups]
            ax.bar(x + (i - (len(series) - 1) / 2) * width, mean, width, yerr=std, capsize=2,
                   color=COLORS[sys], label=LABELS[sys])
        for j, r in enumerate(groups):
            s, f = stats.loc[(w, r, "slime"), "mean"], stats.loc[(w, r, "cgp-fgd"), "mean"]
            sd = stats.loc[(w, r, "cgp-fgd"), "std"]
            change = 100 * (f / s - 1)  # negative: CGP+FGD is shorter than Slime
            at = x[j] + (2 - (len(series) - 1) / 2) * width  # above the cap reading's bar
            ax.text(at, f + (0 if np.isnan(sd) else sd) + 0.02 * top,
                    f"{change:+.1f}%", ha="center", va="bottom", fontsize=7,
                    color="#c44e00")
        ax.set_xticks(x, [f"R={r}" for r in groups])
        ax.set_xlabel("R (groups per rollout)")
        ax.set_title(w)
        ax.grid(axis="y", alpha=0.3)
    first = np.atleast_1d(axes)[0]
    first.set_ylabel("rollout-to-train-end (s)")
    first.set_ylim(0, 1.12 * top)  # room for the labels above the tallest error bar
    fig.legend(*first.get_legend_handles_labels(), loc="lower center", ncol=len(series),
               fontsize=8, bbox_to_anchor=(0.5, 1.0), frameon=False)
    fig.suptitle("Simulated RolloutPipe Fig. 4: rollout-to-train-end (bars: mean of 4 rounds, "
                 "whiskers ±1 sd; orange labels: CGP+FGD's change against Slime, "
                 "+ = longer)", fontsize=10, y=1.13)
    save_figure(fig, path)


def same_lengths(means: pd.DataFrame, workload: str) -> bool:
    """Whether every system's mean response length is the same at every R of `workload`
    (the same prompts and lengths drawn for each: the simulator's work does not depend on
    the schedule), so that Fig. 5's top row is one line, not several drawn on each other."""
    lengths = means.xs(workload, level="workload")["mean_response_tokens"].unstack("system")
    return bool(np.allclose(lengths.to_numpy(), lengths.to_numpy()[:, :1], rtol=1e-9))


def figure5(df: pd.DataFrame, path: Path) -> None:
    """Response length (top) and trainer waiting ratio (bottom) per workload and R. Where
    every system's lengths are equal, the top row draws them once, in black, and says so
    (four lines on top of each other read as one system's line)."""
    df = by_series(df)
    workloads = list(dict.fromkeys(df["workload"]))
    means = df.groupby(["workload", "groups", "system"]).mean(numeric_only=True)
    fig, axes = plt.subplots(2, len(workloads), figsize=(4 * len(workloads), 5.2),
                             sharex=True, sharey="row", squeeze=False)
    for col, w in enumerate(workloads):
        same = same_lengths(means, w)
        for sys in present(df):
            sub = means.xs((w, sys), level=("workload", "system"))
            style = "s:" if sys == PRIORITY else "o-"  # dotted: it may lie on CGP's line
            if not same:
                axes[0, col].plot(sub.index, sub["mean_response_tokens"], style,
                                  color=COLORS[sys], label=LABELS[sys],
                                  mfc="none" if sys == PRIORITY else None)
            axes[1, col].plot(sub.index, 100 * sub["waiting_ratio"], style, color=COLORS[sys],
                              label=LABELS[sys], mfc="none" if sys == PRIORITY else None)
        if same:
            sub = means.xs((w, present(df)[0]), level=("workload", "system"))
            axes[0, col].plot(sub.index, sub["mean_response_tokens"], "o-", color="black",
                              label=f"top: all {len(present(df))} systems (identical)")
        axes[0, col].set_title(w)
        axes[1, col].set_xlabel("R (groups per rollout)")
        axes[1, col].set_xticks(sorted(df["groups"].unique()))
        for row in (0, 1):
            axes[row, col].grid(alpha=0.3)
    axes[0, 0].set_ylabel("mean response length (tokens)")
    axes[1, 0].set_ylabel("trainer waiting ratio (%)")
    handles, labels = axes[1, 0].get_legend_handles_labels()
    for ax in axes[0]:  # the one black line, where the systems' lengths are equal
        for h, t in zip(*ax.get_legend_handles_labels(), strict=True):
            if t not in labels:
                handles, labels = [*handles, h], [*labels, t]
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8,
               bbox_to_anchor=(0.5, 1.0), frameon=False)
    fig.suptitle("Simulated RolloutPipe Fig. 5: response length (top; the same work for all "
                 "systems, so one black line) and trainer waiting ratio (bottom; FGD's "
                 "priority reading admits as CGP does here)", fontsize=10, y=1.08)
    save_figure(fig, path)


def table1_markdown(df: pd.DataFrame, paper: dict[tuple[str, int], tuple[float, ...]]) -> str:
    """Trainer compute per workload and R: harness (paper) for each system (CGP+FGD in
    the cap reading: the priority reading trains the same samples)."""
    df = by_series(df)
    means = df.groupby(["workload", "groups", "system"])["trainer_compute_s"].mean()
    lines = ["Trainer compute time (s), simulated (paper Table 1 in brackets).", "",
             "| workload | R | Slime | CGP | CGP+FGD |", "|---|---|---|---|---|"]
    for (w, r), values in paper.items():
        cells = [f"{means[(w, r, sys)]:.1f} ({v:.1f})" for sys, v in zip(SYSTEMS, values,
                                                                         strict=True)]
        lines.append(f"| {w} | {r} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def frontier_figure(df: pd.DataFrame, cgp: pd.DataFrame, path: Path) -> None:
    """What-if: CGP+FGD's rollout-to-train-end against the frontier width F_w,
    with CGP (no frontier) as a dashed line, one panel per workload."""
    workloads = list(dict.fromkeys(df["workload"]))
    fig, axes = plt.subplots(1, len(workloads), figsize=(4 * len(workloads), 3.2), sharey=True)
    for ax, w in zip(np.atleast_1d(axes), workloads, strict=True):
        sub = df[df["workload"] == w].groupby("frontier")["rollout_to_train_end_s"].agg(
            ["mean", "std"])
        ax.errorbar(sub.index, sub["mean"], yerr=sub["std"], fmt="o-", color=COLORS["cgp-fgd"],
                    label="CGP+FGD", capsize=2)
        base = cgp[cgp["workload"] == w]["rollout_to_train_end_s"].mean()
        ax.axhline(base, ls="--", color=COLORS["cgp"], label="CGP")
        ax.axvline(2, ls=":", color="#555555", label="paper's F_w=2")
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(sub.index), [str(v) for v in sub.index])
        ax.minorticks_off()
        ax.set_xlabel("frontier width F_w (groups)")
        ax.set_title(f"{w}, R=96")
        ax.grid(alpha=0.3)
    first = np.atleast_1d(axes)[0]
    first.set_ylabel("rollout-to-train-end (s)")
    fig.legend(*first.get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=8,
               bbox_to_anchor=(0.5, 1.0), frameon=False)
    fig.suptitle("What-if: FGD frontier width (simulated, mean of 4 rounds, ±1 sd)",
                 fontsize=10, y=1.13)
    save_figure(fig, path)
