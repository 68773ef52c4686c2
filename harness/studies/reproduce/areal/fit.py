"""`rolloutbench calibrate areal`: the calibration of the AReaL reproduction, fitted to
baseline rows only; written to harness/sim/calibration/areal.toml.

Two fits, each named with its rows (FIT_ROWS, STALENESS_FIT):
- verl's trainer MFU, per reading of verl's config, to verl's rows at the smallest GPU
  count of each panel of the scaling figure (five rows: 1.5B 16k and 32k at 32 GPUs, 7B
  16k and 32k at 64, 32B 16k at 256), at the prior mean length. verl is the baseline of
  AReaL's benchmark; its other rows, and every AReaL row, are predictions.
- AReaL's trainer MFU to Fig. 7's staleness-0 bar (128.7k tokens/s), the synchronous
  baseline of that figure, the 1.5B's answers at the mean that bar and Table 2's
  synchronous time give (`staleness_mean`); the other bars are predictions. The scaling
  figure's AReaL runs take this MFU too (the same trainer on the same GPUs).

Training time is about 1 / MFU, so a few fixed-point steps settle an MFU (a throughput
out of reach at any MFU, the engine alone too slow or too fast, is said).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from pathlib import Path

from harness.core.files import git_commit, write_atomic
from harness.core.progress import say
from harness.sim import calibration
from harness.studies.reproduce.areal import readings, runs
from harness.studies.reproduce.grid import run_configs

FIT_ROWS = (("1.5B", 16384, 32), ("1.5B", 32768, 32), ("7B", 16384, 64), ("7B", 32768, 64),
            ("32B", 16384, 256))
STALENESS_FIT = 0  # Fig. 7's staleness-0 bar
FIXED = {"bw_eff": 0.6101, "step_overhead_s": 0.002, "compute_eff": 0.5,
         "micro_overhead_s": 0.05, "weight_sync_s": 0.12, "materialize_s": 0.1,
         "drift": 0.002, "switch_s": 10.0}
AREAL_MFU = 0.30  # the fit's start: trainer_mfu.toml's prior for megatron on NVLink


def targets() -> dict[tuple[str, int, int], float]:
    """verl's published throughput (tokens/s) at the fit's rows, and only those."""
    return {(m, c, n): readings.scaling(m, c, "verl")[n] for m, c, n in FIT_ROWS}


def verl_key(reading: str) -> str:
    return "verl_train_mfu_" + ("defaults" if reading == runs.READINGS[0] else "areal_layout")


def _log_error(got: list[float], want: list[float]) -> float:
    return sum(math.log(g / w) for g, w in zip(got, want, strict=True)) / len(got)


def fit_verl_mfu(reading: str, folder: Path, log: Callable[[str], None]) -> float:
    """verl's train_mfu under `reading` whose throughput at FIT_ROWS matches in the mean
    log ratio (throughput too high: a lower MFU)."""
    want = targets()
    mfu = 0.3
    for _ in range(5):
        tasks = []
        for m, c, n in want:
            cfg = runs.with_mean(runs.verl(m, c, n, reading), runs.MEAN_PRIOR, folder)
            cfg.sim.train_mfu = mfu
            tasks.append((cfg, folder / f"verl-{m}-{c}-{n}.jsonl"))
        got = [r["throughput"] for r in run_configs(tasks, progress=False, reader=runs.summary)]
        err = _log_error(got, list(want.values()))
        log(f"  {reading}: verl train_mfu {mfu:.4f} -> throughput {100 * math.expm1(err):+.1f}%")
        mfu = round(mfu * math.exp(-err * 1.0), 4)
    return mfu


def staleness_mean() -> float:
    """The 1.5B's mean answer (tokens, at the 8k cap) at staleness 0: a sample's tokens
    (`readings.staleness_sample_tokens`) less deepscaler's mean prompt."""
    from workloads.profile import load_profile

    p = load_profile(runs.PROFILE)
    prompt = math.exp(p.prompt_mu_log + p.prompt_sigma_log ** 2 / 2)
    return round(readings.staleness_sample_tokens() - prompt)


def fit_areal_mfu(folder: Path, log: Callable[[str], None]) -> float:
    """AReaL's train_mfu whose staleness-0 throughput is Fig. 7's 128.7k tokens/s."""
    want = 1000 * readings.STALENESS[STALENESS_FIT]
    mfu = AREAL_MFU
    for _ in range(5):
        cfg = runs.with_mean(runs.staleness_run(STALENESS_FIT), staleness_mean(), folder,
                             readings.STALENESS_CAP)
        cfg.sim.train_mfu = mfu
        got = run_configs([(cfg, folder / "eta0.jsonl")], progress=False,
                          reader=runs.summary)[0]["throughput"]
        err = math.log(got / want)
        log(f"  staleness 0: AReaL train_mfu {mfu:.4f} -> {100 * math.expm1(err):+.1f}%")
        mfu = round(mfu * math.exp(-err), 4)
    return mfu


def fit(write: bool = True, progress: bool = True) -> dict[str, float]:
    """Both fits; written to harness/sim/calibration/areal.toml unless `write` is False."""
    log: Callable[[str], None] = say if progress else (lambda _m: None)  # stderr
    with tempfile.TemporaryDirectory(prefix="rolloutbench-areal-fit-") as scratch:
        folder = Path(scratch)
        out = {verl_key(r): fit_verl_mfu(r, folder, log) for r in runs.READINGS}
        out["staleness_mean"] = staleness_mean()
        out["areal_train_mfu"] = fit_areal_mfu(folder, log)
    if write:
        text = ["# Written by `rolloutbench calibrate areal`; re-run it to reproduce.",
                "# Fitted to baseline rows only (harness/studies/reproduce/areal/fit.py:",
                "# FIT_ROWS, verl's smallest-GPU rows; STALENESS_FIT, Fig. 7's staleness 0).",
                f"# commit: {git_commit()}", "", "[fit]",
                "# AReaL's trainer, fitted to Fig. 7's staleness-0 bar (fit.py)",
                f"train_mfu = {out['areal_train_mfu']}", "", "[fixed]",
                "# the verl-async calibration's carried values (its file says where each is "
                "from)"]
        text += [f"{k} = {v}" for k, v in FIXED.items()]
        text += ["", "[lengths]", "# verl's trainer MFU per reading of its config, fitted to "
                 "FIT_ROWS at the prior mean", f"mean_prior = {runs.MEAN_PRIOR}",
                 *[f"{k} = {v}" for k, v in out.items()], "", "[hardware]",
                 'model = "qwen2.5-7b"', f'trainer_gpu = "{runs.GPU}"',
                 'trainer_framework = "megatron"',
                 'source = "AReaL@10d9b282 benchmark/verl_v0_3_0_post1_76084d3 (H800: '
                 'docs/tutorial/installation.md:9)"']
        write_atomic(calibration.path_of(runs.PAPER), "\n".join(text) + "\n")
    return out
