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
from harness.core.trace_io import trace_file
from harness.sim import calibration
from harness.studies.claims import Claim
from harness.studies.reproduce.grid import run_configs
from harness.studies.reproduce.pool import is_twin, profiles_folder
from harness.studies.reproduce.verl_async import claims, runs
from harness.studies.reproduce.verl_async.figures import figure

PAPER = runs.PAPER
RESULTS = ("verl-async.csv",)
FIGURES = ("verl_async_steps.png",)
READING = ("the verl reading", "../docs/reproductions.md#verl")


def engine() -> RunConfig:
    """One engine of the setup (every run's engines are H20s under vLLM)."""
    return runs.base("verl", 0, 32)


def lengths(reading: str) -> dict[int | str, tuple[float, float, float]]:
    """A reading's fitted (mean length, train_scale, train_step_fixed_s) by the colocated
    run each run takes them from: a 7B size, or a one-row setup's name (`runs.SINGLE`;
    none in the 7B-only readings: per size, no fixed cost, eager, and the swapped cells', whose
    cells only the 7B's claims read). The swapped cells change no fit (`fit`)."""
    from harness.studies.reproduce.verl_async.fit import framework_scale

    fitted = calibration.load(PAPER)["lengths"]
    base = reading.removesuffix(f", {runs.SWAPPED}")
    names = {n: "seven_b" for n in runs.SIZES}
    if base in runs.BASE_READINGS[::2] and not reading.endswith(runs.SWAPPED):
        names |= {name: name for name in runs.SINGLE}
    out: dict[int | str, tuple[float, float, float]] = {}
    for key, name in names.items():
        setup = runs.SINGLE.get(name, runs.SEVEN_B)
        if base == runs.BASE_READINGS[0]:
            out[key] = (float(fitted[name]), float(fitted[f"{name}_train_scale"]),
                        float(fitted[f"{name}_step_fixed_s"]))
        elif base == runs.BASE_READINGS[2]:
            out[key] = (float(fitted[f"{name}_from_training"]), framework_scale(setup),
                        float(fitted[f"{name}_from_training_step_fixed_s"]))
        elif base == runs.NO_FIXED:
            out[key] = (float(fitted[name]), float(fitted[f"{name}_f0_train_scale"]), 0.0)
        elif base == runs.EAGER:
            out[key] = (float(fitted[f"{name}_eager"]),
                        float(fitted[f"{name}_eager_train_scale"]),
                        float(fitted[f"{name}_eager_step_fixed_s"]))
        else:
            out[key] = (float(fitted[f"size_{key}"]), float(fitted["per_size_train_scale"]),
                        float(fitted["per_size_step_fixed_s"]))
    return out


def trainer(cfg: RunConfig, fitted: tuple[float, float, float], reading: str = "") -> RunConfig:
    """`cfg` with a reading's kernel trainer (its scale and fixed cost a step), and its
    engine served eagerly in the eager reading (`runs.EAGER`)."""
    cfg.sim.engine_eager = reading == runs.EAGER
    cfg.sim.train_mfu = None
    cfg.sim.train_scale, cfg.sim.train_step_fixed_s = fitted[1], fitted[2]
    return cfg


def simulate(seed: int, traces: Path, progress: bool = True) -> pd.DataFrame:
    """Every run of every reading: one row each, with the trace's summary. The one-row
    setups (30B-A3B, one-step-off) have no per-size reading and no swapped cells."""
    with profiles_folder(traces) as profiles:
        return _simulate(seed, traces, profiles, progress)


def _simulate(seed: int, traces: Path, profiles: Path, progress: bool) -> pd.DataFrame:
    tasks, rows = [], []
    for reading in runs.READINGS:
        fitted = lengths(reading)
        means = {key: value[0] for key, value in fitted.items()}
        folder = traces / reading.replace(" ", "-")
        for run in runs.runs(seed):
            if run.size not in fitted:  # a one-row setup in a 7B-only reading
                continue
            cfg = trainer(runs.with_lengths(run, means, profiles), fitted[run.size],
                          reading)
            stem = (f"{reading.replace(', ', '-').replace(' ', '_')}-"  # the progress line
                    f"{run.label.replace(' ', '_').replace(':', '-')}")  # names both
            tasks.append((cfg, trace_file(folder, stem)))  # made if kept (execute)
            rows.append({"reading": reading, "label": run.label,
                         "mean_tokens": means[run.size], "train_scale": fitted[run.size][1],
                         "train_step_fixed_s": fitted[run.size][2]})
    done = run_configs(tasks, label="verl-async", progress=progress, reader=runs.summary)
    return pd.DataFrame([{**row, **summary} for row, summary in zip(rows, done, strict=True)])


def reproduce(out: Path, figures: Path, rounds: int = 4, seed: int = 0) -> list[Claim]:
    """The runs and their claims; `rounds` is fixed by the setup (`runs`)."""
    sim = simulate(seed, out / "runs" / PAPER)
    write_atomic(out / "verl-async.csv", sim.to_csv(index=False, float_format="%.6g"))
    if not is_twin():
        figures.mkdir(parents=True, exist_ok=True)
        figure(sim, figures / "verl_async_steps.png")
    return claims.claims(sim)
