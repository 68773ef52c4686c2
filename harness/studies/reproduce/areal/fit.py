"""`rolloutbench calibrate areal`: the calibrations of the AReaL reproduction, fitted to
baseline rows only; written to harness/sim/calibration/areal.toml (AReaL's trainer) and
areal-verl.toml (verl's runs: an FSDP trainer, `runs.VERL_CALIBRATION`).

Both trainers are the kernel trainer (harness/sim/trainer), whose calibratable numbers are
`train_scale` (kernel time over the database's kernels) and `train_step_fixed_s` (seconds
a step that do not shrink with GPUs). Two fits, each named with its rows (FIT_ROWS,
STALENESS_FIT):
- verl's scale, per reading of verl's config, to verl's rows at the smallest GPU count of
  each panel of the scaling figure (five rows: 1.5B 16k and 32k at 32 GPUs, 7B 16k and
  32k at 64, 32B 16k at 256), at the prior mean length. verl is the baseline of AReaL's
  benchmark; its other rows, and every AReaL row, are predictions. Its fixed cost a step
  is fitted only where one model's rows span two or more trainer GPU counts
  (`fits_fixed`): what does not shrink with GPUs is told apart from what does by one
  setup at two sizes. These rows train on 32, 64 and 256 GPUs, but each model on one
  count, so the counts go with the models, and a fixed cost fitted to them takes up how
  verl's step differs between models, not between GPU counts (tried: 475 s a step at its
  defaults, and verl's 1.5B then gains 1.47x from 32 to 256 GPUs against the figure's
  2.64x); it stays 0.
- AReaL's scale to Fig. 7's staleness-0 bar (128.7k tokens/s), the synchronous baseline of
  that figure, the 1.5B's answers at the mean that bar and Table 2's synchronous time give
  (`staleness_mean`): one row on one trainer GPU count, so no fixed cost (0). The other
  bars are predictions; the scaling figure's AReaL runs take this scale too (the same
  trainer on the same GPUs).

A step is linear in both numbers (A + B x scale + fixed: the scale multiplies the
kernels, the fixed cost is added once a step; `trainer_knob`), so two runs a row at
two scales give A and B, the fit needs no further simulation, and one run a row at the
fitted values checks it (FSDP's gathers overlap its kernels, linear only where the
kernels are the longer).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path

from harness.core.config import RunConfig
from harness.core.files import git_commit, write_atomic
from harness.core.progress import say
from harness.core.trace_io import trace_file
from harness.sim import calibration
from harness.studies.reproduce.areal import readings, runs
from harness.studies.reproduce.grid import run_configs
from harness.studies.reproduce.trainer_knob import KNOBS, SCALE, linear

FIT_ROWS = (("1.5B", 16384, 32), ("1.5B", 32768, 32), ("7B", 16384, 64), ("7B", 32768, 64),
            ("32B", 16384, 256))
STALENESS_FIT = 0  # Fig. 7's staleness-0 bar
FIXED = {"bw_eff": 0.6101, "step_overhead_s": 0.002, "compute_eff": 0.5,
         "micro_overhead_s": 0.05, "weight_sync_s": 0.12, "materialize_s": 0.1,
         "drift": 0.002, "switch_s": 10.0}
# The MFU line's trainer (a run with sim.train_model=mfu only): the fits of e99f74a, when
# the MFU line priced these trainers; kept because a calibration must name one, not refitted
MFU_LINE = {runs.PAPER: 0.0772, runs.VERL_CALIBRATION: 0.025}
FIXED_MAX = 5000.0  # the fixed cost's search range, seconds a step (verl's steps: 1,000-3,000 s)


def targets() -> dict[tuple[str, int, int], float]:
    """verl's published throughput (tokens/s) at the fit's rows, and only those."""
    return {(m, c, n): readings.scaling(m, c, "verl")[n] for m, c, n in FIT_ROWS}


def verl_key(reading: str) -> str:
    """The reading's name in areal-verl.toml's [readings] table."""
    return "defaults" if reading == runs.READINGS[0] else "areal_layout"


def verl_speed(reading: str) -> tuple[float, float]:
    """(train_scale, train_step_fixed_s) of verl's trainer under `reading`, as fitted."""
    table = calibration.load(runs.VERL_CALIBRATION)["readings"]
    key = verl_key(reading)
    return float(table[f"{key}_train_scale"]), float(table[f"{key}_train_step_fixed_s"])


def fits_fixed(rows: tuple[tuple[str, int, int], ...] = FIT_ROWS) -> bool:
    """Whether a fixed cost a step is fitted: one model's rows at two or more GPU counts."""
    counts: dict[str, set[int]] = {}
    for model, _, gpus in rows:
        counts.setdefault(model, set()).add(gpus)
    return any(len(n) >= 2 for n in counts.values())


def golden(loss: Callable[[float], float], lo: float, hi: float) -> float:
    """The minimum of a one-humped `loss` on [lo, hi] (golden-section search)."""
    for _ in range(80):
        x1, x2 = hi - 0.618 * (hi - lo), lo + 0.618 * (hi - lo)
        lo, hi = (lo, x2) if loss(x1) < loss(x2) else (x1, hi)
    return (lo + hi) / 2


def fit_scale_fixed(ab: Mapping[Hashable, tuple[float, float]],
                    observed: Mapping[Hashable, float], fixed_cost: bool = True
                    ) -> tuple[float, float, float]:
    """(scale, fixed, rms log error) minimising the squared log error of A + B x scale +
    fixed against the observed step times: the scale in the knob's range (log space), the
    fixed cost in [0, FIXED_MAX] (each fixed cost's best scale, then the best of those),
    or 0 without `fixed_cost`."""
    k = KNOBS[SCALE]

    def loss(scale: float, fixed: float) -> float:
        return sum((math.log(ab[c][0] + ab[c][1] * scale + fixed) - math.log(t)) ** 2
                   for c, t in observed.items())

    def best_scale(fixed: float) -> float:
        return math.exp(golden(lambda x: loss(math.exp(x), fixed), math.log(k.lo),
                               math.log(k.hi)))

    fixed = golden(lambda f: loss(best_scale(f), f), 0.0, FIXED_MAX) if fixed_cost else 0.0
    scale = best_scale(fixed)
    return scale, fixed, math.sqrt(loss(scale, fixed) / len(observed))


def _step_times(tasks: list[tuple[RunConfig, Path]]) -> list[tuple[float, float]]:
    """(step seconds, tokens a step) of each run (`runs.summary`)."""
    return [(r["step_s"], r["throughput"] * r["step_s"])
            for r in run_configs(tasks, progress=False, reader=runs.summary)]


def _verl_tasks(reading: str, folder: Path, scale: float, fixed: float
                ) -> list[tuple[RunConfig, Path]]:
    tasks = []
    for m, c, n in FIT_ROWS:
        cfg = runs.with_mean(runs.verl(m, c, n, reading), runs.MEAN_PRIOR, folder)
        cfg.sim.train_scale, cfg.sim.train_step_fixed_s = scale, fixed
        tasks.append((cfg, trace_file(folder, f"verl-{m}-{c}-{n}-{scale:g}-{fixed:g}")))
    return tasks


def fit_verl(reading: str, folder: Path, log: Callable[[str], None]) -> dict[str, float]:
    """verl's train_scale and train_step_fixed_s under `reading` (module docstring)."""
    probes = KNOBS[SCALE].probes
    at = [dict(zip(FIT_ROWS, _step_times(_verl_tasks(reading, folder, p, 0.0)), strict=True))
          for p in probes]
    ab = linear(KNOBS[SCALE], {c: t for c, (t, _) in at[0].items()},
                {c: t for c, (t, _) in at[1].items()})
    want = targets()
    observed = {c: at[0][c][1] / want[c] for c in FIT_ROWS}  # the step the figure implies
    scale, fixed, rms = fit_scale_fixed(ab, observed, fits_fixed())
    scale, fixed = round(scale, 4), round(fixed, 2)
    got = _step_times(_verl_tasks(reading, folder, scale, fixed))
    errors = [want[c] / (tok / t) - 1 for c, (t, tok) in zip(FIT_ROWS, got, strict=True)]
    log(f"  {reading}: verl train_scale {scale:.4f}, train_step_fixed_s {fixed:.2f} "
        f"(rms log error {rms:.4f}); throughput at the rows, simulated over published: "
        + ", ".join(f"{-e / (1 + e):+.1%}" for e in errors))
    return {"train_scale": scale, "train_step_fixed_s": fixed, "rms_log_error": round(rms, 4)}


def staleness_mean() -> float:
    """The 1.5B's mean answer (tokens, at the 8k cap) at staleness 0: a sample's tokens
    (`readings.staleness_sample_tokens`) less deepscaler's mean prompt."""
    from workloads.profile import load_profile

    p = load_profile(runs.PROFILE)
    prompt = math.exp(p.prompt_mu_log + p.prompt_sigma_log ** 2 / 2)
    return round(readings.staleness_sample_tokens() - prompt)


def _staleness_task(folder: Path, scale: float) -> list[tuple[RunConfig, Path]]:
    cfg = runs.with_mean(runs.staleness_run(STALENESS_FIT), staleness_mean(), folder,
                         readings.STALENESS_CAP)
    cfg.sim.train_scale = scale
    return [(cfg, trace_file(folder, f"eta0-{scale:g}"))]


def fit_areal(folder: Path, log: Callable[[str], None]) -> float:
    """AReaL's train_scale whose staleness-0 throughput is Fig. 7's 128.7k tokens/s."""
    k = KNOBS[SCALE]
    at = [_step_times(_staleness_task(folder, p))[0] for p in k.probes]
    (a, b), = linear(k, {0: at[0][0]}, {0: at[1][0]}).values()
    want = 1000 * readings.STALENESS[STALENESS_FIT]
    scale = (at[0][1] / want - a) / b
    if not k.lo <= scale <= k.hi:
        raise ValueError(f"AReaL's staleness-0 bar needs train_scale {scale:.3g}, outside "
                         f"[{k.lo}, {k.hi}]: the engine alone is too slow or too fast")
    scale = round(scale, 4)
    t, tok = _step_times(_staleness_task(folder, scale))[0]
    log(f"  staleness 0: AReaL train_scale {scale:.4f} -> {(tok / t) / want - 1:+.2%}")
    return scale


def fit(write: bool = True, progress: bool = True) -> dict[str, float]:
    """Both fits; written to the two calibration files unless `write` is False."""
    log: Callable[[str], None] = say if progress else (lambda _m: None)  # stderr
    with tempfile.TemporaryDirectory(prefix="rolloutbench-areal-fit-") as scratch:
        folder = Path(scratch)
        verl = {verl_key(r): fit_verl(r, folder, log) for r in runs.READINGS}
        out = {f"{key}_{name}": value for key, fitted in verl.items()
               for name, value in fitted.items()}
        out["staleness_mean"] = staleness_mean()
        out["areal_train_scale"] = fit_areal(folder, log)
    if write:
        _write_areal(out)
        _write_verl(out)
    return out


def _head(what: str) -> list[str]:
    return [f"# Written by `rolloutbench calibrate areal`; re-run it to reproduce. {what}",
            "# Fitted to baseline rows only (harness/studies/reproduce/areal/fit.py:",
            "# FIT_ROWS, verl's smallest-GPU rows; STALENESS_FIT, Fig. 7's staleness 0).",
            f"# commit: {git_commit()}", ""]


def _tail(framework: str) -> list[str]:
    text = ["", "[fixed]",
            "# the verl-async calibration's carried values (its file says where each is from)"]
    text += [f"{k} = {v}" for k, v in FIXED.items()]
    return text + ["", "[hardware]", 'model = "qwen2.5-7b"', f'trainer_gpu = "{runs.GPU}"',
                   f'trainer_framework = "{framework}"',
                   'source = "AReaL@10d9b282 benchmark/verl_v0_3_0_post1_76084d3 (H800: '
                   'docs/tutorial/installation.md:9)"']


def _write_areal(out: dict[str, float]) -> None:
    text = _head("AReaL's trainer.") + [
        "[fit]", "# AReaL's kernel trainer, fitted to Fig. 7's staleness-0 bar (fit.py); one",
        "# trainer GPU count, so no per-step fixed cost",
        f"train_scale = {out['areal_train_scale']}", "train_step_fixed_s = 0.0",
        "# the MFU line's (sim.train_model=mfu only): e99f74a's fit, not refitted",
        f"train_mfu = {MFU_LINE[runs.PAPER]}", "", "[lengths]",
        f"mean_prior = {runs.MEAN_PRIOR}", f"staleness_mean = {out['staleness_mean']}"]
    write_atomic(calibration.path_of(runs.PAPER), "\n".join(text + _tail("megatron")) + "\n")


def _write_verl(out: dict[str, float]) -> None:
    text = _head("verl v0.3's runs (FSDP).") + [
        "[fit]", "# verl at its defaults (the first reading); each run sets its reading's own",
        f"train_scale = {out['defaults_train_scale']}",
        f"train_step_fixed_s = {out['defaults_train_step_fixed_s']}",
        "# the MFU line's (sim.train_model=mfu only): e99f74a's fit, not refitted",
        f"train_mfu = {MFU_LINE[runs.VERL_CALIBRATION]}", "", "[readings]",
        "# verl's kernel trainer per reading of its config, fitted to FIT_ROWS at the prior",
        "# mean (rms_log_error: the fit's, over the five rows' step times)"]
    text += [f"{k} = {v}" for k, v in out.items() if k.startswith(("defaults", "areal_lay"))]
    write_atomic(calibration.path_of(runs.VERL_CALIBRATION),
                 "\n".join(text + _tail("fsdp")) + "\n")
