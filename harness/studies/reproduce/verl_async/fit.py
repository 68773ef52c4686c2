"""`rolloutbench calibrate verl-async`: the fit to verl's colocated runs, and only to them.

Two unknowns, fitted to the baseline's own observations (README.md:354-361, the
`colocate sync` rows at 32, 64 and 128 H20s):

- the mean response length, to the colocated `gen` seconds (the rollout: every response
  of the step done). verl reports no length; the engine's steps come from the measured-
  kernel database (H20 carried from the H200's tables, harness/sim/presets/
  kernel_gpus.toml), so nothing of the engine is fitted. Gen time rises with the mean, so
  the mean is found by bisection in log space on the mean log ratio (simulated / paper)
  over the sizes it is fitted to;
- `train_mfu`, to the colocated `old_log_prob + update_actor` seconds, given those
  lengths: training time is proportional to 1 / MFU (but for a small fixed cost per
  micro-batch), so a few fixed-point steps on the mean log ratio settle it.

Two readings (`runs.READINGS`): one mean for the three sizes, or each size its own. The
fully-async rows are never run here: they are the predictions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core.files import git_commit, write_atomic
from harness.sim import calibration
from harness.studies.reproduce.grid import run_configs
from harness.studies.reproduce.verl_async import claims, runs

SEED = 0
BOUNDS = (200.0, 14000.0)  # mean response tokens searched (the cap is 28,672)
FIXED = {
    "bw_eff": 0.6101, "step_overhead_s": 0.002, "compute_eff": 0.5,
    "micro_overhead_s": 0.05, "weight_sync_s": 0.12, "materialize_s": 0.1, "drift": 0.002,
    "switch_s": 10.0,
}
FIXED_NOTES = (
    "# bw_eff, compute_eff: the roofline's (the claims' roofline twin), RolloutPipe's fit and",
    "# prior carried over; the measured kernels price the engine otherwise",
    "# weight_sync_s: verl's own measurement of one parameter sync of Qwen2.5-Math-7B on H20",
    "# (fully_async_policy/README.md, checkpoint-engine table: 0.12 s without it)",
    "# switch_s, materialize_s, micro_overhead_s, step_overhead_s, drift: the PipelineRL",
    "# calibration's priors, carried over",
)
FOLDER = Path("runs") / runs.PAPER / "fit"


def _colocated(means: dict[int, float], mfu: float, sizes: tuple[int, ...],
               write: Path) -> dict[int, dict[str, float]]:
    tasks = []
    for n in sizes:
        cfg = runs.colocated(SEED, n)
        cfg.workload = runs.workload(means[n], write / "profiles")
        cfg.sim.calibration, cfg.sim.train_mfu = "pipelinerl", mfu  # only the priors differ
        for key, value in FIXED.items():
            setattr(cfg.sim, key, value)
        folder = write / f"colocate-{n}"
        folder.mkdir(parents=True, exist_ok=True)
        tasks.append((cfg.validate(), folder / "verl.jsonl"))
    return dict(zip(sizes, run_configs(tasks, progress=False, reader=runs.summary),
                    strict=True))


def _log_error(got: dict[int, dict[str, float]], key: str, want: dict[int, float]) -> float:
    return sum(math.log(got[n][key] / want[n]) for n in got) / len(got)


def fit_lengths(sizes: tuple[int, ...], log: Callable[[str], None]) -> float:
    """The mean response length whose colocated gen times match the paper's at `sizes`
    (mean log ratio 0)."""
    lo, hi = BOUNDS
    gen = {n: claims.COLOCATE[n]["gen"] for n in sizes}
    for _ in range(14):
        mid = math.sqrt(lo * hi)
        err = _log_error(_colocated({n: mid for n in sizes}, 0.3, sizes, FOLDER), "gen_s", gen)
        log(f"  sizes {sizes}: mean {mid:.0f} tokens -> gen {100 * math.expm1(err):+.1f}%")
        lo, hi = (mid, hi) if err < 0 else (lo, mid)
    return round(math.sqrt(lo * hi))


def fit_mfu(means: dict[int, float], log: Callable[[str], None]) -> float:
    """train_mfu whose colocated old_log_prob + update_actor match the paper's."""
    want = {n: claims.COLOCATE[n]["old_log_prob"] + claims.COLOCATE[n]["update_actor"]
            for n in means}
    mfu = 0.3
    for _ in range(4):
        err = _log_error(_colocated(means, mfu, tuple(means), FOLDER), "train_s", want)
        log(f"  train_mfu {mfu:.4f} -> training {100 * math.expm1(err):+.1f}%")
        mfu = round(mfu * math.exp(err), 4)
    return mfu


def fit(write: bool = True, progress: bool = True) -> dict[str, Any]:
    """Both readings' lengths and MFU; written to harness/sim/calibration/verl-async.toml."""
    log = print if progress else (lambda _m: None)
    log("verl-async, reading 'one length': the mean response length")
    one = fit_lengths(runs.SIZES, log)
    log("verl-async, reading 'one length': train_mfu")
    mfu_one = fit_mfu({n: one for n in runs.SIZES}, log)
    per: dict[int, float] = {}
    for n in runs.SIZES:
        log(f"verl-async, reading 'per-size lengths': the mean at {n} GPUs")
        per[n] = fit_lengths((n,), log)
    log("verl-async, reading 'per-size lengths': train_mfu")
    mfu_per = fit_mfu(per, log)
    result: dict[str, Any] = {"train_mfu": mfu_one, "mean_tokens": one,
                              "per_size_mean_tokens": {str(n): per[n] for n in runs.SIZES},
                              "per_size_train_mfu": mfu_per}
    if write:
        lines = ["# Written by `rolloutbench calibrate verl-async`; re-run it to reproduce.",
                 "# Fitted to verl's colocated sync runs only (fully_async_policy/README.md:"
                 "354-361):",
                 "# the mean response length to their gen seconds, train_mfu to their",
                 "# old_log_prob + update_actor seconds (harness/studies/reproduce/verl_async/"
                 "fit.py).",
                 f"# commit: {git_commit()}", "", "[fit]", "# reading 'one length'",
                 f"train_mfu = {mfu_one}", "", "[fixed]", *FIXED_NOTES]
        lines += [f"{k} = {v}" for k, v in FIXED.items()]
        lines += ["", "[lengths]", "# mean response tokens: reading 'one length', then",
                  "# reading 'per-size lengths' (each colocated size its own) with its MFU",
                  f"one = {one}"]
        lines += [f"size_{n} = {per[n]}" for n in runs.SIZES]
        lines += [f"per_size_train_mfu = {mfu_per}"]
        lines += HARDWARE
        write_atomic(calibration.path_of(runs.PAPER), "\n".join(lines) + "\n")
    return result


HARDWARE = [
    "", "[hardware]",
    "# the model whose publication weight_sync_s prices, and the trainer the MFU is fitted on",
    'model = "qwen2.5-7b"', 'trainer_gpu = "h20"', 'trainer_framework = "fsdp"',
    'source = "verl@1dda039 fully_async_policy/README.md:333-338 (H20, Qwen2.5-Math-7B, '
    'vllm+FSDP2)"',
]
