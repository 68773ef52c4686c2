"""AReaL's own measurements on the simulator (a sixth reproduction: a framework's published
benchmark, not a paper).

AReaL's benchmark against verl v0.3 (AReaL@10d9b282:benchmark/verl_v0_3_0_post1_76084d3/:
DeepSeek-R1-Distill-Qwen 1.5B, 7B and 32B at 16k and 32k context on 32 to 512 GPUs) and
its staleness-throughput figure (blog/AReaL_v0_3.md:248), with verl's dynamic-scheduling
README's two static splits read as `rolloutbench plan` would. The folder: `runs` (the
setups, the runs, the reader), `readings` (the published values and how each was read off
its figure), `fit` (the calibration, baseline rows only), `claims`, `dynsched` (verl's
splits) and `figures`. This module is what `harness.studies.reproduce` reads of a paper.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.config import RunConfig
from harness.core.files import write_atomic
from harness.core.trace_io import trace_file
from harness.sim import calibration
from harness.studies.claims import Claim
from harness.studies.reproduce.areal import claims, dynsched, readings, runs
from harness.studies.reproduce.areal.figures import scaling_figure, staleness_figure
from harness.studies.reproduce.areal.fit import verl_speed
from harness.studies.reproduce.grid import run_configs
from harness.studies.reproduce.pool import is_twin, profiles_folder

PAPER = runs.PAPER
RESULTS = ("areal_scaling.csv", "areal_staleness.csv", "areal_dynsched.csv")
FIGURES = ("areal_scaling.png", "areal_staleness.png")
READING = ("the AReaL reading", "../docs/reproductions.md#areal")


def engine() -> RunConfig:
    """One engine of the setup (AReaL's SGLang on H800s)."""
    return runs.areal("7B", 16384, 64)


def simulate(seed: int, traces: Path, progress: bool = True) -> tuple[pd.DataFrame,
                                                                        pd.DataFrame]:
    """Every run of both figures: (the scaling rows, the staleness rows)."""
    with profiles_folder(traces) as profiles:
        return _simulate(seed, traces, profiles, progress)


def _simulate(seed: int, traces: Path, profiles: Path, progress: bool
              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    lengths = calibration.load(PAPER)["lengths"]
    tasks, rows = [], []
    for reading in runs.READINGS:
        for run in runs.scaling_runs(reading, seed):
            cfg = runs.with_mean(run.cfg, float(lengths["mean_prior"]), profiles)
            if cfg.system == "verl":  # verl's trainer, fitted per reading (fit.py)
                cfg.sim.train_scale, cfg.sim.train_step_fixed_s = verl_speed(reading)
            stem = f"{reading}-{run.label}".replace(" ", "_").replace("'", "")
            tasks.append((cfg, trace_file(traces, stem)))
            rows.append({"reading": reading, "label": run.label})
    stale = []
    for eta in readings.STALENESS:
        cfg = runs.with_mean(runs.staleness_run(eta, seed), float(lengths["staleness_mean"]),
                             profiles, readings.STALENESS_CAP)
        tasks.append((cfg, trace_file(traces, f"staleness-{runs.eta_label(eta)}")))
        stale.append({"eta": runs.eta_label(eta)})
    done = run_configs(tasks, label="areal", progress=progress, reader=runs.summary)
    n = len(rows)
    scaling = pd.DataFrame([{**r, **d} for r, d in zip(rows, done[:n], strict=True)])
    staleness = pd.DataFrame([{**r, **d} for r, d in zip(stale, done[n:], strict=True)])
    return scaling, staleness


def reproduce(out: Path, figures: Path, rounds: int = 4, seed: int = 0) -> list[Claim]:
    """The runs and their claims; `rounds` is fixed by the setup (`runs`)."""
    scaling, staleness = simulate(seed, out / "runs" / PAPER)
    points = dynsched.evaluate(seed, out / "runs" / PAPER)
    sched = pd.DataFrame([{"trainer_gpus": t, "rollout_gpus": r, "model": dynsched.STAND_IN,
                           "bound": dynsched.bound(p), **{k: p[k] for k in (
                               "trained_tokens_per_s", "paper_waiting_ratio", "step_s")},
                           "refused": dynsched.refusal()} for (t, r), p in points.items()])
    for name, df in zip(RESULTS, (scaling, staleness, sched), strict=True):
        write_atomic(out / name, df.to_csv(index=False, float_format="%.6g"))
    if not is_twin():
        figures.mkdir(parents=True, exist_ok=True)
        scaling_figure(scaling, figures / FIGURES[0])
        staleness_figure(staleness, figures / FIGURES[1])
    return (claims.scaling_claims(scaling) + claims.staleness_claims(staleness)
            + dynsched.claims(points))
