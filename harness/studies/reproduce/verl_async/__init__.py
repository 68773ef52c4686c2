"""verl's fully-async and one-step-off measurements on the simulator (a fifth
reproduction: published measurements, not a paper).

verl-project/verl@1dda039's fully_async_policy/README.md reports, for Qwen2.5-Math-7B
on H20s, colocated sync against fully async at three sizes, a mode ablation, a
staleness ablation and a require_batches ablation, each as seconds a step. The folder:
`runs` (the setup and its readings, the runs, what is read off a trace), `fit` (the
calibration: lengths and MFU fitted to the colocated rows only), `claims` (the
README's numbers and the claims) and `figures`. This module is what
`harness.studies.reproduce` reads of a paper.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.config import RunConfig
from harness.core.files import write_atomic
from harness.sim import calibration
from harness.studies.claims import Claim
from harness.studies.reproduce.grid import run_configs
from harness.studies.reproduce.pool import is_twin
from harness.studies.reproduce.verl_async import claims, runs
from harness.studies.reproduce.verl_async.figures import figure

PAPER = runs.PAPER
RESULTS = ("verl-async.csv",)
FIGURES = ("verl_async_steps.png",)
READING = ("the README's verl reading", "../README.md#verl")


def engine() -> RunConfig:
    """One engine of the setup (every run's engines are H20s under vLLM)."""
    return runs.base("verl", 0, 32)


def lengths(reading: str) -> tuple[dict[int, float], float | None]:
    """A reading's fitted mean lengths by colocated size, and its MFU (None: the
    calibration's own, the reading 'one length')."""
    fitted = calibration.load(PAPER)["lengths"]
    if reading == "one length":
        return {n: float(fitted["one"]) for n in runs.SIZES}, None
    return ({n: float(fitted[f"size_{n}"]) for n in runs.SIZES},
            float(fitted["per_size_train_mfu"]))


def simulate(seed: int, traces: Path, progress: bool = True) -> pd.DataFrame:
    """Every run of every reading: one row each, with the trace's summary."""
    tasks, rows = [], []
    for reading in runs.READINGS:
        means, mfu = lengths(reading)
        folder = traces / reading.replace(" ", "-")
        for run in runs.runs(seed):
            cfg = runs.with_lengths(run, means, traces / "profiles")
            cfg.sim.train_mfu = mfu
            path = folder / f"{run.label.replace(' ', '_').replace(':', '-')}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            tasks.append((cfg, path))
            rows.append({"reading": reading, "label": run.label,
                         "mean_tokens": means[run.size]})
    done = run_configs(tasks, label="verl-async", progress=progress, reader=runs.summary)
    return pd.DataFrame([{**row, **summary} for row, summary in zip(rows, done, strict=True)])


def reproduce(out: Path, figures: Path, rounds: int = 4, seed: int = 0) -> list[Claim]:
    """The runs and their claims; `rounds` is fixed by the setup (`runs`)."""
    sim = simulate(seed, Path("runs") / PAPER)
    write_atomic(out / "verl-async.csv", sim.to_csv(index=False, float_format="%.6g"))
    if not is_twin():
        figures.mkdir(parents=True, exist_ok=True)
        figure(sim, figures / "verl_async_steps.png")
    return claims.claims(sim)
