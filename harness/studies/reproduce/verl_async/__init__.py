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
READING = ("the verl reading", "../docs/reproductions.md#verl")


def engine() -> RunConfig:
    """One engine of the setup (every run's engines are H20s under vLLM)."""
    return runs.base("verl", 0, 32)


def lengths(reading: str) -> dict[int | str, tuple[float, float]]:
    """A reading's fitted (mean length, MFU) by the colocated run each run takes them from:
    a 7B size, or a one-row setup's name (`runs.SINGLE`; none in the per-size reading nor
    in the swapped cells' readings, whose cells only the 7B's fit reads)."""
    from harness.studies.reproduce.verl_async.fit import prior_mfu

    fitted = calibration.load(PAPER)["lengths"]
    swapped = reading.endswith(runs.SWAPPED)
    tail = "_swapped" if swapped else ""
    base = reading.removesuffix(f", {runs.SWAPPED}")
    names = {n: "seven_b" for n in runs.SIZES}
    if not swapped:
        names |= {name: name for name in runs.SINGLE}
    out: dict[int | str, tuple[float, float]] = {}
    for key, name in names.items():
        setup = runs.SINGLE.get(name, runs.SEVEN_B)
        if base == runs.BASE_READINGS[0]:
            out[key] = (float(fitted[name]), float(fitted[f"{name}_train_mfu{tail}"]))
        elif base == runs.BASE_READINGS[2]:
            out[key] = (float(fitted[f"{name}_from_training{tail}"]),
                        prior_mfu(setup.framework))
        elif key in runs.SIZES:
            out[key] = (float(fitted[f"size_{key}"]),
                        float(fitted[f"per_size_train_mfu{tail}"]))
    return out


def simulate(seed: int, traces: Path, progress: bool = True) -> pd.DataFrame:
    """Every run of every reading: one row each, with the trace's summary. The one-row
    setups (30B-A3B, one-step-off) have no per-size reading and no swapped cells."""
    tasks, rows = [], []
    for reading in runs.READINGS:
        fitted = lengths(reading)
        means = {key: mean for key, (mean, _) in fitted.items()}
        folder = traces / reading.replace(" ", "-")
        for run in runs.runs(seed):
            if run.size not in fitted:  # a one-row setup in a 7B-only reading
                continue
            cfg = runs.with_lengths(run, means, traces / "profiles")
            cfg.sim.train_mfu = fitted[run.size][1]
            stem = (f"{reading.replace(', ', '-').replace(' ', '_')}-"  # the progress line
                    f"{run.label.replace(' ', '_').replace(':', '-')}")  # names both
            path = folder / f"{stem}.jsonl"
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
