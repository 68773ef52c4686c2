"""docs/readings.md#rollpacker states the fitted trainer and veRL's simulated stages:
they must be the calibration's and the results' (the paragraph still said `train_mfu`
priced the trainer, a 81 s rollout and a 22.2% reward share after the kernel trainer
became the default and the engine moved)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pandas as pd

from harness.sim.trainer import constants

REPO = Path(__file__).resolve().parents[1]


def _paragraph() -> str:
    text = (REPO / "docs" / "readings.md").read_text("utf-8")
    start = text.index("*The reward share*: 5-13% cannot be reached.")
    return " ".join(text[start:text.index("**Consistency row:**", start)].split())


def test_the_trainer_is_the_kernel_trainers_fitted_scale() -> None:
    fit = tomllib.loads((REPO / "harness/sim/calibration/rollpacker.toml").read_text())["fit"]
    megatron = constants.FRAMEWORKS["megatron"]["scale"]
    text = _paragraph()
    assert f"`train_scale` fitted to veRL's 22% training share: {fit['train_scale']:.3f}" in text
    assert f"{fit['train_scale'] / megatron:.1f}x Megatron's measured {megatron:g}" in text
    assert f"{fit['train_mfu']:g} at the refit under the kernel trainer" in text


def test_verls_stages_are_the_results() -> None:
    t2 = pd.read_csv(REPO / "results/rollpacker_table2.csv", keep_default_na=False)
    verl = t2[(t2["size"] == "14B/16k") & (t2["system"] == "veRL") & (t2["reading"] == "")]
    row = verl.iloc[0]
    total = row["rollout_s"] + row["reward_s"] + row["train_s"]  # the claims' share
    text = _paragraph()
    assert f"near 32 s with every check at once ({row['reward_s']:.1f} s)" in text
    assert f"rollout of {row['rollout_s']:.1f} s and training of {row['train_s']:.1f} s" in text
    assert f"the share stays at {100 * row['reward_s'] / total:.1f}%" in text
