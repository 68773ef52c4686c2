"""`rolloutbench calibrate verl-async`: the fit to verl's colocated runs, and only to them.

Each setup's colocated sync rows (fully_async_policy/README.md:354-361 at 32, 64 and 128
H20s and :446 for Qwen3-30B-A3B; one_step_off_policy/README.md:64, 66) give gen and
training seconds. The unknowns: the mean response length (verl reports none) and the
kernel trainer's speed (harness/sim/trainer): `train_scale`, its kernel time over the
database's kernels, and `train_step_fixed_s`, seconds an optimizer step that do not shrink
with GPUs (issue #35's F). The engine's steps come from the measured-kernel database (H20
carried from the H200's tables, harness/sim/presets/kernel_gpus.toml), nothing of it fitted.

The fit's inputs, named before any prediction was looked at: the colocated gen at 32, 64
and 128 GPUs (the 7B's one mean), the colocated training (old_log_prob + update_actor) at 64
and 128 only, the one-row setups' gen (one-step-off: generate_sequences) and training.
Colocate 32's training is not fitted: that run is not stationary (494 s a step over its
first 100 steps, 790 over 400: README.md:356-357) and it alone breaks F + C/n; it is an
input not fitted. Two GPU counts give the scale and the fixed cost; a one-row setup gives
the scale alone at a carried fixed cost (one-step-off FSDP2: the 7B's, the same model,
framework and GPUs; the Megatron setups: none, no Megatron baseline at two GPU counts).
The readings (`runs.READINGS`):

- `lengths from gen`: the mean to the colocated gen, then scale and fixed cost to the
  colocated training;
- `lengths from gen, no fixed cost` (7B): the same mean, the scale alone (fixed cost 0)
  in the mean log ratio over 64 and 128, beside it: what the fixed cost does;
- `lengths from gen, per size` (7B): each size its own mean, then scale and fixed cost;
- `lengths from training`: the scale the framework's measured constant
  (harness/sim/trainer/constants.py), the mean and the fixed cost to the colocated
  training (the difference of the two sizes' training decides the mean: the fixed cost,
  the same a window at both, drops out of it); gen is then a check, not a fit.

PR #4307's swapped cells (`runs.SWAPPED`) move colocate 32's training only, which no fit
reads, so both cell orders share one fit.

The switch between engine and trainer is not fitted: `harness/sim/switch.py` prices it
per framework (sized from the one-step-off README's gen minus generate_sequences) and the
runs charge it (`runs.colocated`), so the colocated gen the lengths are fitted to holds
the same switch verl's does. The one-step-off baselines come first (`_one_step_lead`):
verl publishes their generate_sequences, the replicas' mean generation, so their means are
fitted to it, and the slowest replica's lead over the mean there (the simulated static
split's) is taken out of each framework's published switch for every colocated run after
(`LEADS`). The switch's trainer side (offload and onload in old_log_prob and update_actor,
under a second) is charged by the simulator in its hand-overs, so it moves from the
training target to the gen target. The colocated weight sync is the transfer model's CUDA
IPC publication (`runs.colocated_sync_s`), in the fit as in the runs.

Gen and training rise with the mean, so a mean is found by bisection in log space on the
mean log ratio (simulated / README) over the sizes it is fitted to; training is close to
linear in the scale and linear in the fixed cost, so a few linear solves settle them
(`fit_speed`). The fully-async and one-step-off rows are never run here: they are the
predictions.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core.files import write_atomic
from harness.core.progress import say
from harness.core.trace_io import trace_file
from harness.sim import calibration, trainer_mfu
from harness.sim.trainer import speed as trainer_speed
from harness.studies.reproduce.grid import run_configs
from harness.studies.reproduce.verl_async import claims, fit_file, runs
from harness.studies.reproduce.verl_async.fit_file import FIXED

SEED = 0
BOUNDS = (200.0, 14000.0)  # mean response tokens searched, and at most 0.6 of the cap
# The slowest replica's lead over the mean, per framework, in the one-step-off colocated
# runs (`_one_step`): taken out of the published switch, whose generate_sequences is a
# mean over ranks while the simulated static split prices the longest itself
LEADS: dict[str, float] = {}


Speed = tuple[float, float]  # (train_scale, train_step_fixed_s): the kernel trainer's fit


def _colocated(means: dict[int | str, float], speed: Speed, setup: runs.Setup,
               sizes: tuple[int, ...], write: Path) -> dict[int, dict[str, float]]:
    tasks = []
    for n in sizes:
        cfg = runs.colocated(SEED, n, setup)  # its sync: the transfer model's (runs)
        lead = LEADS.get(setup.framework, 0.0)  # the fit's own, not the file's
        cfg.sim.switch_s = round(runs.switch_of(setup, n, lead).handover_s, 4)
        cfg.workload = runs.workload(means[n], write / "profiles", setup.max_response)
        for key, value in FIXED.items():  # every value the fit's own, not the file's
            if key != "weight_sync_s":
                setattr(cfg.sim, key, value)
        cfg.sim.train_mfu = None  # the kernel trainer, at the speed being fitted
        cfg.sim.train_scale, cfg.sim.train_step_fixed_s = speed
        folder = write / f"{setup.name}-colocate-{n}"  # made if kept (execute)
        tasks.append((cfg.validate(), trace_file(folder, "verl")))
    return dict(zip(sizes, run_configs(tasks, progress=False, reader=runs.summary),
                    strict=True))


def _log_error(got: dict[int, dict[str, float]], key: str, want: dict[int, float]) -> float:
    return sum(math.log(got[n][key] / want[n]) for n in got) / len(got)


def _bisect(error: Callable[[float], float], lo: float, hi: float, name: str,
            log: Callable[[str], None]) -> float:
    """The mean length (tokens, log space) where `error` (a log ratio rising with the
    mean) crosses 0; said when the search ends at its bound with the target not reached."""
    err = 0.0
    for _ in range(14):
        mid = math.sqrt(lo * hi)
        err = error(mid)
        lo, hi = (mid, hi) if err < 0 else (lo, mid)
    if abs(err) > 0.02:
        log(f"warning: {name}: not reached ({100 * math.expm1(err):+.1f}% at the search's "
            f"bound, mean {mid:.0f} tokens): the fit is not a fit")
    return round(math.sqrt(lo * hi))


def fit_lengths(want: dict[int, float], key: str, speed: Speed, setup: runs.Setup,
                log: Callable[[str], None], folder: Path) -> float:
    """The mean response length whose colocated `key` seconds (gen_s, generate_s or
    train_s) match `want` (seconds by GPU count) in the mean log ratio, the trainer at
    `speed`."""
    sizes = tuple(want)

    def error(mid: float) -> float:
        err = _log_error(_colocated(dict.fromkeys(sizes, mid), speed, setup, sizes, folder),
                         key, want)
        log(f"  {setup.name} at {sizes}: mean {mid:.0f} tokens -> {key} "
            f"{100 * math.expm1(err):+.1f}%")
        return err

    return _bisect(error, BOUNDS[0], min(BOUNDS[1], 0.6 * setup.max_response),
                   f"{setup.name} {key}", log)


def steps_a_window(setup: runs.Setup) -> int:
    """Optimizer steps in a colocated window: its prompts over the mini-batch's."""
    return setup.r // setup.u


def fit_speed(means: dict[int | str, float], want: dict[int, float], setup: runs.Setup,
              log: Callable[[str], None], folder: Path, fixed_s: float | None = None
              ) -> Speed:
    """(train_scale, train_step_fixed_s) whose colocated training (old_log_prob +
    update_actor and its optimizer steps, and ref where the setup has a KL loss) matches
    `want` (seconds by GPU count). Training is close to linear in the scale (FSDP's
    gathers overlap the kernels: max(kernels, gathers)) and exactly linear in the fixed
    cost (steps_a_window of it a window), so each pass measures the slope in the scale at
    each size and solves the linear model, three passes. Two GPU counts give both; with
    `fixed_s` given (one GPU count, or the reading without it) the scale alone, its mean
    log ratio 0. Said when the scale is below 1, faster than the database's own kernels
    at the same shapes."""
    sizes, k = tuple(want), steps_a_window(setup)
    scale, fixed = 1.0, fixed_s or 0.0
    for _ in range(3):
        at = _colocated(means, (scale, fixed), setup, sizes, folder)
        up = _colocated(means, (scale * 1.25, fixed), setup, sizes, folder)
        slope = {n: (up[n]["train_s"] - at[n]["train_s"]) / (0.25 * scale) for n in sizes}
        rest = {n: at[n]["train_s"] - slope[n] * scale - k * fixed for n in sizes}
        if fixed_s is None and len(sizes) > 1:
            a, b = sizes[:2]
            scale = ((want[a] - rest[a]) - (want[b] - rest[b])) / (slope[a] - slope[b])
            fixed = max((want[a] - rest[a] - slope[a] * scale) / k, 0.0)
        else:
            line = {n: (rest[n] + k * fixed, slope[n]) for n in sizes}
            scale = _log_root(lambda x, line=line: sum(
                math.log(max(a + b * x, 1e-9) / want[n]) for n, (a, b) in line.items()))
        log(f"  {setup.name} at {sizes}: training {[round(at[n]['train_s'], 1) for n in sizes]}"
            f" s against {[round(want[n], 1) for n in sizes]} -> scale {scale:.4f}, fixed "
            f"{fixed:.3f} s a step")
    scale = round(scale, 4)
    if scale < 1:
        log(f"warning: {setup.name}: train_scale {scale} is below 1, faster than the database's "
            f"own kernels: the lengths that give the colocated gen are too many tokens for its "
            f"training time")
    return scale, round(fixed, 3)


def _log_root(f: Callable[[float], float], lo: float = 1e-3, hi: float = 1e3) -> float:
    """Where a rising `f` crosses 0, by bisection in log space (no simulation: a model)."""
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return math.sqrt(lo * hi)


def fit_lengths_and_fixed(want: dict[int, float], scale: float, setup: runs.Setup,
                          log: Callable[[str], None], folder: Path) -> tuple[float, float]:
    """`lengths from training` at two GPU counts: the scale given (the framework's
    measured constant), the mean from the difference of the two trainings (the fixed
    cost, the same a window at both, drops out of it), then the fixed cost from what is
    left."""
    a, b = tuple(want)[:2]
    sizes, k = (a, b), steps_a_window(setup)

    def error(mid: float) -> float:
        got = _colocated(dict.fromkeys(sizes, mid), (scale, 0.0), setup, sizes, folder)
        diff = got[a]["train_s"] - got[b]["train_s"]
        err = math.log(max(diff, 1e-3) / (want[a] - want[b]))
        log(f"  {setup.name}: mean {mid:.0f} tokens -> training {a} - {b} GPUs {diff:.1f} s "
            f"against {want[a] - want[b]:.1f}")
        return err

    mean = _bisect(error, BOUNDS[0], min(BOUNDS[1], 0.6 * setup.max_response),
                   f"{setup.name} training difference", log)
    got = _colocated(dict.fromkeys(sizes, mean), (scale, 0.0), setup, sizes, folder)
    fixed = max(sum(want[n] - got[n]["train_s"] for n in sizes) / (2 * k), 0.0)
    return mean, round(fixed, 3)


def prior_mfu(framework: str) -> float:
    """The neutral MFU of `framework` on NVLink GPUs (the H20's class)."""
    return float(trainer_mfu.table()[framework]["scale_up"])


def framework_scale(setup: runs.Setup) -> float:
    """The kernel trainer's measured scale for the setup's framework
    (harness/sim/trainer/constants.py): `lengths from training`'s trainer."""
    return float(trainer_speed.framework_scale(setup.framework))


def _lines(name: str, mean: float, speed: Speed, trained: float, trained_fixed: float
           ) -> list[str]:
    return [f"{name} = {mean}", f"{name}_train_scale = {speed[0]}",
            f"{name}_step_fixed_s = {speed[1]}", f"{name}_from_training = {trained}",
            f"{name}_from_training_step_fixed_s = {trained_fixed}"]


def _single_fits(name: str, setup: runs.Setup, gen: dict[int, float], train: dict[int, float],
                 fixed_s: float, log: Callable[[str], None], folder: Path) -> list[str]:
    """A one-row setup's readings: its one GPU count gives the scale alone, so the fixed
    cost a step is carried (`fixed_s`: the 7B's, same framework; else 0), in both."""
    log(f"verl-async {name}, reading 'lengths from gen'")
    mean = fit_lengths(gen, "gen_s", (1.0, fixed_s), setup, log, folder)
    speed = fit_speed(dict.fromkeys(gen, mean), train, setup, log, folder, fixed_s)
    log(f"verl-async {name}, reading 'lengths from training' (scale {framework_scale(setup)})")
    trained = fit_lengths(train, "train_s", (framework_scale(setup), fixed_s), setup, log,
                          folder)
    return _lines(name, mean, speed, trained, fixed_s)


def targets(setup: runs.Setup, gen: dict[int, float], train: dict[int, float]
            ) -> tuple[dict[int, float], dict[int, float]]:
    """The simulated colocated gen and training that match verl's: the switch's trainer side
    (verl's training, the simulator's hand-overs, which its gen reading holds) moved."""
    side = {n: runs.switch_of(setup, n, 0.0).trainer_s for n in gen}  # bytes: no lead
    return ({n: gen[n] + side[n] for n in gen}, {n: train[n] - side[n] for n in train})




def _seven_b(log: Callable[[str], None], folder: Path) -> list[str]:
    """The 7B's fits, as calibration lines: `lengths from gen` (its fixed cost and, beside
    it, none: `_f0`), `lengths from gen, per size` and `lengths from training`. One cell
    order serves both: PR #4307's swap moves colocate 32's training only, which no fit
    reads."""
    seven = runs.SEVEN_B
    cells = claims.colocate("")
    gen, train = targets(seven, {n: cells[n]["gen"] for n in runs.SIZES},
                         {n: cells[n]["old_log_prob"] + cells[n]["update_actor"]
                          for n in runs.SIZES})
    fit_train = {n: train[n] for n in claims.FIT_SIZES}
    log("verl-async seven_b, reading 'lengths from gen'")
    mean = fit_lengths(gen, "gen_s", (1.0, 0.0), seven, log, folder)
    speed = fit_speed(dict.fromkeys(claims.FIT_SIZES, mean), fit_train, seven, log, folder)
    log("verl-async seven_b, reading 'lengths from gen', no fixed cost")
    free = fit_speed(dict.fromkeys(claims.FIT_SIZES, mean), fit_train, seven, log, folder, 0.0)
    log(f"verl-async seven_b, reading 'lengths from training' (scale "
        f"{framework_scale(seven)})")
    trained, trained_fixed = fit_lengths_and_fixed(fit_train, framework_scale(seven), seven,
                                                   log, folder)
    lines = _lines("seven_b", mean, speed, trained, trained_fixed)
    lines.append(f"seven_b_f0_train_scale = {free[0]}")
    log("verl-async 7B, reading 'lengths from gen, per size'")
    per: dict[int | str, float] = {
        n: fit_lengths({n: gen[n]}, "gen_s", (1.0, 0.0), seven, log, folder)
        for n in runs.SIZES}
    lines += [f"size_{n} = {per[n]}" for n in runs.SIZES]
    scale, fixed = fit_speed(per, fit_train, seven, log, folder)
    return [*lines, f"per_size_train_scale = {scale}", f"per_size_step_fixed_s = {fixed}"]


def _seven_b_eager(log: Callable[[str], None], folder: Path) -> list[str]:
    """The 7B's `lengths from gen` with vLLM served eagerly, as verl's rollout did in the
    runs' era (`runs.EAGER`): the mean to the colocated gen, then scale and fixed cost."""
    seven = runs.SEVEN_B_EAGER
    cells = claims.colocate("")
    gen, train = targets(seven, {n: cells[n]["gen"] for n in runs.SIZES},
                         {n: cells[n]["old_log_prob"] + cells[n]["update_actor"]
                          for n in claims.FIT_SIZES})
    log(f"verl-async seven_b, reading '{runs.EAGER}'")
    mean = fit_lengths(gen, "gen_s", (1.0, 0.0), seven, log, folder)
    scale, fixed = fit_speed(dict.fromkeys(claims.FIT_SIZES, mean), train, seven, log, folder)
    return [f"seven_b_eager = {mean}", f"seven_b_eager_train_scale = {scale}",
            f"seven_b_eager_step_fixed_s = {fixed}"]


def _one_step_lead(name: str, setup: runs.Setup, log: Callable[[str], None],
                   folder: Path) -> float:
    """A one-step-off baseline's mean, where verl publishes generate_sequences beside gen
    (one_step_off_policy/README.md:64, 66): fitted to generate_sequences (the replicas'
    mean generation, `summary.replica_times`: the switch out of it); then the slowest
    replica's lead over the mean at that length, which the published gen minus
    generate_sequences also holds, goes to LEADS (and the file). Neither depends on the
    trainer, so they come before every fit of it."""
    engine = "FSDP2" if setup.framework == "fsdp" else "Megatron"
    n = claims.SINGLE_TARGETS[name][0]
    generate = float(claims.ONE_STEP[engine]["generate"])  # type: ignore[arg-type]
    log(f"verl-async {name}, reading 'lengths from gen' (from generate_sequences)")
    mean = fit_lengths({n: generate}, "generate_s", (1.0, 0.0), setup, log, folder)
    LEADS[setup.framework] = round(
        _colocated({n: mean}, (1.0, 0.0), setup, (n,), folder)[n]["lead_s"], 2)
    log(f"  {name}: the slowest replica leads the mean by {LEADS[setup.framework]} s")
    return mean


def _one_step(name: str, setup: runs.Setup, mean: float, fixed: tuple[float, float],
              log: Callable[[str], None], folder: Path) -> list[str]:
    """A one-step-off baseline's trainer: the scale at its gen-fitted `mean`, and the
    mean at the framework's scale, each at its carried fixed cost a step (`fixed`: the
    7B's two readings' for FSDP2, none for Megatron)."""
    n, _, train_s = claims.SINGLE_TARGETS[name]
    _, train = targets(setup, {n: 0.0}, {n: train_s})
    log(f"verl-async {name}: the scale at fixed cost {fixed[0]} s a step")
    speed = fit_speed({n: mean}, train, setup, log, folder, fixed[0])
    log(f"verl-async {name}, reading 'lengths from training' (scale {framework_scale(setup)})")
    trained = fit_lengths(train, "train_s", (framework_scale(setup), fixed[1]), setup, log,
                          folder)
    return _lines(name, mean, speed, trained, fixed[1])


def fit(write: bool = True, progress: bool = True) -> dict[str, Any]:
    """Every setup's readings; written to harness/sim/calibration/verl-async.toml. The
    one-step-off leads first (the 7B's runs take FSDP2's out of their switch), then the
    7B, whose fixed cost a step is carried to the one-step-off FSDP2 baseline (the same
    model, framework and GPUs, at one GPU count); the Megatron setups carry none."""
    log = say if progress else (lambda _m: None)  # stderr: stdout is the fit's JSON
    with tempfile.TemporaryDirectory(prefix="rolloutbench-verl-fit-") as scratch:
        folder = Path(scratch)  # the fit's traces are scratch: a dry run writes nothing
        LEADS.clear()
        if write:  # the Megatron setups' calibration must exist before their runs
            _write_megatron({})
        osp = {name: _one_step_lead(name, runs.SINGLE[name], log, folder)
               for name in ("one_step_fsdp2", "one_step_megatron")}
        lines = _seven_b(log, folder) + _seven_b_eager(log, folder)
        seven = _values(lines)
        carried = (seven["seven_b_step_fixed_s"], seven["seven_b_from_training_step_fixed_s"])
        lines += _one_step("one_step_fsdp2", runs.ONE_STEP_FSDP2, osp["one_step_fsdp2"],
                           carried, log, folder)
        lines += _one_step("one_step_megatron", runs.ONE_STEP_MEGATRON,
                           osp["one_step_megatron"], (0.0, 0.0), log, folder)
        n, gen_s, train_s = claims.SINGLE_TARGETS["moe"]
        gen, train = targets(runs.MOE, {n: gen_s}, {n: train_s})
        lines += _single_fits("moe", runs.MOE, gen, train, 0.0, log, folder)
    result = _values(lines)
    if write:
        text = fit_file.text(result, lines, LEADS)
        write_atomic(calibration.path_of(runs.PAPER), "\n".join(text) + "\n")
        _write_megatron(result)
    return result


def _write_megatron(result: dict[str, float]) -> None:
    text = fit_file.megatron_text(result, LEADS)
    write_atomic(calibration.path_of(runs.MEGATRON_PAPER), "\n".join(text) + "\n")


def _values(lines: list[str]) -> dict[str, float]:
    return {k: float(v) for k, v in (line.split(" = ") for line in lines)}
