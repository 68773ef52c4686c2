"""RollPacker's Table 2 and Fig. 11 as figures, simulated beside the paper's.

They read the tables' rows only (a CSV of results/ will do), never running anything.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.plots import save_figure
from harness.studies.reproduce.rollpacker.claims import TABLE2
from harness.studies.reproduce.rollpacker.runs import SIZES, STAGES, reading_of

DEFAULT = ("16k lengths", "persistent anchor")  # the readings the figures draw


def figure(t2: pd.DataFrame, path: Path) -> None:
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(8, 3.4))
    x = np.arange(len(SIZES))
    if "reading" not in t2:  # a table of before readings were run
        t2 = t2.assign(reading=[reading_of(s, 0 if y == "veRL" else STAGES.index(y) + 1,
                                           *DEFAULT) for s, y in zip(t2["size"], t2["system"],
                                                                     strict=True)])
    # read back from a CSV, a blank reading (veRL's, the one-reading rows') is NaN
    t2 = t2.assign(reading=t2["reading"].fillna(""))
    step = t2.set_index(["size", "system", "reading"])["step_s"]

    def first(size: str, system: str) -> float:  # the first reading: 16k lengths, persistent
        stage = 0 if system == "veRL" else STAGES.index(system) + 1
        return float(step[(size, system, reading_of(size, stage, *DEFAULT))])

    for i, label in enumerate(STAGES):
        sim = [first(s, "veRL") / first(s, label) for s in SIZES]
        ax.bar(x + (i - 1.5) * 0.2, sim, 0.2, label=label)
        ax.scatter(x + (i - 1.5) * 0.2, [TABLE2[s][i] for s in SIZES], marker="_", s=200,
                   color="k", zorder=3, label="paper" if i == 0 else None)
    ax.set_xticks(x, list(SIZES))
    ax.set_xlabel("model / response cap")
    ax.set_ylabel("speedup over veRL (x, step time)")
    ax.axhline(1, color="#555555", lw=0.8)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False,
              title="components (cumulative)", title_fontsize=7)
    ax.set_title("Simulated RollPacker Table 2: cumulative speedup over veRL "
                 "(paper: black ticks; 16k lengths, persistent anchor)", fontsize=9)
    save_figure(fig, path)


def eta_figure(eta: pd.DataFrame, path: Path) -> None:
    """Fig. 11: average rollout time per round against eta, normalised to no tail batching."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    for reading, style in (("16k lengths", "-"), ("32k-scaled lengths", "--")):
        rows = (eta[eta["reading"] == reading] if "reading" in eta
                else eta if reading == "16k lengths" else eta.iloc[:0])
        if rows.empty:
            continue
        base = rows[(rows["axis"] == "prompts") & (rows["eta"] == 1.0)]["rollout_s"].iloc[0]
        for axis, marker in (("prompts", "o"), ("responses", "s")):
            sub = rows[rows["axis"] == axis]
            ax.plot(sub["eta"], sub["rollout_s"] / base, marker=marker, ls=style,
                    label=f"η on {axis}, {reading}")
    ax.set_xlabel("speculation factor η (requests started / requests kept)")
    ax.set_ylabel("rollout time per round\n(x, against η = 1)")
    ax.set_title("Simulated RollPacker Fig. 11: tail batching's η (32B/32k)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6)
    save_figure(fig, path)
