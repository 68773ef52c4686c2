"""The step times of verl's READMEs beside the simulated ones, one bar group a run: the 7B
runs of the fully-async README (left), and the one-row setups (right: Qwen3-30B-A3B, and
one-step-off under FSDP2 and Megatron)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.plots import save_figure
from harness.studies.reproduce.verl_async.claims import (
    ASYNC,
    COLOCATE,
    MOE_ASYNC,
    MOE_COLOCATE,
    ONE_STEP,
    SAME_RUN,
    SCRIPT_READING,
)

ORDER = [f"colocate {n}" for n in COLOCATE] + [label for label in ASYNC if label not in SAME_RUN]
for _label in ("fully async 16:16", "fully async 32:32"):
    ORDER.insert(ORDER.index(_label) + 1, f"{_label} s=0.1")
OTHERS = {"30B colocate 128": MOE_COLOCATE["step"], "30B fully async 96:32": MOE_ASYNC["step"],
          **{f"osp colocate 16 {e}": p["colocate"][0] for e, p in ONE_STEP.items()},
          **{f"one-step-off 4:12 {e}": p["osp"][0] for e, p in ONE_STEP.items()}}
COLOURS = ["#4c72b0", "#dd8452", "#55a868", "#8fa9d6", "#eebb99", "#99cfa6", "#8172b3",
           "#c44e52"]


def published(label: str) -> tuple[float, float]:
    """The README's step for a run: (low, high), high above low where it gives two (64:64:
    its 300-step and 400-step means, README.md:408 and :361)."""
    if label in OTHERS:
        return OTHERS[label], OTHERS[label]
    if label.startswith("colocate"):
        step = COLOCATE[int(label.split()[1])]["step"]
        return step, step
    same = {run: row for row, run in SAME_RUN.items()}
    if label in same:
        return ASYNC[same[label]][0][0], ASYNC[label][0][1]
    return ASYNC[SCRIPT_READING.get(label, label)][0]


def _bars(ax, sim: pd.DataFrame, labels: list[str]) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    every = list(dict.fromkeys(sim["reading"]))  # a reading's colour is the same in each panel
    readings = [r for r in every if set(labels) <= set(sim[sim["reading"] == r]["label"])]
    x = np.arange(len(labels))
    width = 0.8 / (1 + len(readings))
    lo = np.array([published(label)[0] for label in labels])
    hi = np.array([published(label)[1] for label in labels])
    ax.bar(x - 0.4 + width / 2, hi, width, color="#444444", label="verl README (H20)")
    ax.errorbar(x - 0.4 + width / 2, lo, yerr=[np.zeros_like(lo), hi - lo], fmt="none",
                ecolor="#bbbbbb", capsize=2)
    for i, reading in enumerate(readings):
        by = sim[sim["reading"] == reading].set_index("label")
        ax.bar(x - 0.4 + width * (i + 1.5), [by.loc[label, "step_s"] for label in labels],
               width, color=COLOURS[every.index(reading) % len(COLOURS)],
               label=f"simulated, {reading}")
    ticks = [label.replace("fully async ", "async ") + (" (fit)" if "colocate" in label else "")
             for label in labels]
    ax.set_xticks(x, ticks, rotation=30, ha="right", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)


def figure(sim: pd.DataFrame, path: Path) -> None:
    """Grouped bars: the README's step (its two values as a whisker where it gives two)
    and each reading's simulated step."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(15, 4.4), width_ratios=(11, 6))
    _bars(left, sim, ORDER)
    left.set_ylabel("seconds a step")
    left.set_title("Qwen2.5-Math-7B, fully async (512 prompts x 16 a step)", fontsize=10)
    _bars(right, sim, [label for label in OTHERS if label in set(sim["label"])])
    right.set_title("Qwen3-30B-A3B fully async; 7B one-step-off (16 GPUs)", fontsize=10)
    fig.suptitle("verl on H20: step times, its READMEs against the simulator ((fit): the "
                 "colocated rows the lengths and the trainer are fitted to; the rest "
                 "predictions)",
                 fontsize=11)
    save_figure(fig, path)
