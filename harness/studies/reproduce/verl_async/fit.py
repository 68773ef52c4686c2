"""`rolloutbench calibrate verl-async`: the fit to verl's colocated runs, and only to them.

Each setup's colocated sync rows (fully_async_policy/README.md:354-361 at 32, 64 and 128
H20s and :446 for Qwen3-30B-A3B; one_step_off_policy/README.md:64, 66) give two
observations, gen and training, for two unknowns: the mean response length (verl reports
none) and the trainer's MFU. The engine's steps come from the measured-kernel database (H20
carried from the H200's tables, harness/sim/presets/kernel_gpus.toml), nothing of it fitted.
Three readings (`runs.READINGS`):

- `lengths from gen`: the mean to the colocated gen (one mean for the 7B's three sizes),
  then the MFU to the colocated training;
- `lengths from gen, per size`: the same with each 7B size its own mean (7B only);
- `lengths from training`: the MFU the neutral prior for the trainer's framework and GPU
  (harness/sim/presets/trainer_mfu.toml), the mean to the colocated training; gen is then
  a check, not a fit.

The switch between engine and trainer is not fitted: `harness/sim/switch.py` prices it
per framework (sized from the one-step-off README's gen minus generate_sequences) and the
runs charge it (`runs.colocated`), so the colocated gen the lengths are fitted to holds
the same switch verl's does, and neither the lengths nor the MFU absorb it. The one-step-off
baselines come first (`_one_step`): verl publishes their generate_sequences, the replicas'
mean generation, so their means are fitted to it, and the slowest replica's lead over the
mean there (the simulated static split's) is taken out of each framework's published
switch for every colocated run after (`LEADS`). The switch's
trainer side (offload and onload in old_log_prob and update_actor, under a second) is
charged by the simulator in its hand-overs, so it moves from the training target to the
gen target. Each 7B fit is run in both orders of the cells PR #4307 swapped
(`runs.SWAPPED`): only the training of colocate 32 differs.

Gen and training rise with the mean, so a mean is found by bisection in log space on the
mean log ratio (simulated / README) over the sizes it is fitted to; training time is
proportional to 1 / MFU (but for a small fixed cost a micro-batch), so a few fixed-point
steps settle an MFU. The fully-async and one-step-off rows are never run here: they are the
predictions.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core.files import git_commit, write_atomic
from harness.core.progress import say
from harness.sim import calibration, trainer_mfu
from harness.sim.weight_sync import publish_s
from harness.studies.reproduce.grid import run_configs
from harness.studies.reproduce.verl_async import claims, runs

SEED = 0
BOUNDS = (200.0, 14000.0)  # mean response tokens searched, and at most 0.6 of the cap
FIXED = {
    "bw_eff": 0.6101, "step_overhead_s": 0.002, "compute_eff": 0.5,
    "micro_overhead_s": 0.05, "weight_sync_s": 0.12, "materialize_s": 0.1, "drift": 0.002,
}
FIXED_NOTES = (
    "# bw_eff, compute_eff: the roofline's (the claims' roofline twin), RolloutPipe's fit and",
    "# prior carried over; the measured kernels price the engine otherwise",
    "# weight_sync_s: verl's own measurement of one parameter sync of Qwen2.5-Math-7B on H20",
    "# (fully_async_policy/README.md, checkpoint-engine table: 0.12 s without it)",
    "# materialize_s, micro_overhead_s, step_overhead_s, drift: the PipelineRL",
    "# calibration's priors, carried over",
    "# switch_s: one hand-over, from harness/sim/switch.py (the 7B under FSDP2 on 32 H20s;",
    "# each colocated run sets its own setup's): not fitted",
)


# The slowest replica's lead over the mean, per framework, in the one-step-off colocated
# runs (`_one_step`): taken out of the published switch, whose generate_sequences is a
# mean over ranks while the simulated static split prices the longest itself
LEADS: dict[str, float] = {}


def _colocated(means: dict[int | str, float], mfu: float, setup: runs.Setup,
               sizes: tuple[int, ...], write: Path) -> dict[int, dict[str, float]]:
    tasks = []
    for n in sizes:
        cfg = runs.colocated(SEED, n, setup)
        lead = LEADS.get(setup.framework, 0.0)  # the fit's own, not the file's
        cfg.sim.switch_s = round(runs.switch_of(setup, n, lead).handover_s, 4)
        cfg.workload = runs.workload(means[n], write / "profiles", setup.max_response)
        cfg.sim.calibration, cfg.sim.train_mfu = "pipelinerl", mfu  # only the priors differ
        for key, value in FIXED.items():
            setattr(cfg.sim, key, value)
        # published as the runs will: verl's 7B time, scaled to the setup's model's bytes
        cfg.sim.weight_sync_s = publish_s(setup.model, {"hardware": {"model": OWN_MODEL}},
                                          FIXED["weight_sync_s"])
        folder = write / f"{setup.name}-colocate-{n}"
        folder.mkdir(parents=True, exist_ok=True)
        tasks.append((cfg.validate(), folder / "verl.jsonl"))
    return dict(zip(sizes, run_configs(tasks, progress=False, reader=runs.summary),
                    strict=True))


def _log_error(got: dict[int, dict[str, float]], key: str, want: dict[int, float]) -> float:
    return sum(math.log(got[n][key] / want[n]) for n in got) / len(got)


def fit_lengths(want: dict[int, float], key: str, mfu: float, setup: runs.Setup,
                log: Callable[[str], None], folder: Path) -> float:
    """The mean response length whose colocated `key` seconds (gen_s or train_s) match
    `want` (seconds by GPU count) in the mean log ratio, the trainer at `mfu`; said when
    the search ends at its bound with the target not reached."""
    lo, hi = BOUNDS[0], min(BOUNDS[1], 0.6 * setup.max_response)  # a mean below its cap
    sizes = tuple(want)
    for _ in range(14):
        mid = math.sqrt(lo * hi)
        err = _log_error(_colocated(dict.fromkeys(sizes, mid), mfu, setup, sizes, folder),
                         key, want)
        log(f"  {setup.name} at {sizes}: mean {mid:.0f} tokens -> {key} "
            f"{100 * math.expm1(err):+.1f}%")
        lo, hi = (mid, hi) if err < 0 else (lo, mid)
    if abs(err) > 0.02:
        log(f"warning: {setup.name}: {key} not reached ({100 * math.expm1(err):+.1f}% at the "
            f"search's bound, mean {mid:.0f} tokens): the fit is not a fit")
    return round(math.sqrt(lo * hi))


def fit_mfu(means: dict[int | str, float], want: dict[int, float], setup: runs.Setup,
            log: Callable[[str], None], folder: Path) -> float:
    """train_mfu whose colocated training (old_log_prob + update_actor, and ref where the
    setup has a KL loss) matches `want` (seconds by GPU count); said when above 1."""
    mfu = 0.3
    for _ in range(4):
        err = _log_error(_colocated(means, mfu, setup, tuple(want), folder), "train_s", want)
        log(f"  {setup.name} train_mfu {mfu:.4f} -> training {100 * math.expm1(err):+.1f}%")
        mfu = round(mfu * math.exp(err), 4)
    if mfu > 1:
        log(f"warning: {setup.name}: train_mfu {mfu} is above 1, outside physics: the lengths "
            f"that give the colocated gen are too many tokens for its training time")
    return mfu


def prior_mfu(framework: str) -> float:
    """The neutral MFU of `framework` on NVLink GPUs (the H20's class)."""
    return float(trainer_mfu.table()[framework]["scale_up"])


def _setup_fits(name: str, setup: runs.Setup, gen: dict[int, float], train: dict[int, float],
                framework: str, log: Callable[[str], None], folder: Path) -> list[str]:
    """A setup's `lengths from gen` and `lengths from training` fits, as calibration lines
    (NAME = mean, NAME_train_mfu = MFU, NAME_from_training = mean)."""
    log(f"verl-async {name}, reading 'lengths from gen'")
    mean = fit_lengths(gen, "gen_s", 0.3, setup, log, folder)
    mfu = fit_mfu(dict.fromkeys(gen, mean), train, setup, log, folder)
    log(f"verl-async {name}, reading 'lengths from training' (MFU {prior_mfu(framework)})")
    trained = fit_lengths(train, "train_s", prior_mfu(framework), setup, log, folder)
    return [f"{name} = {mean}", f"{name}_train_mfu = {mfu}", f"{name}_from_training = {trained}"]


def targets(setup: runs.Setup, gen: dict[int, float], train: dict[int, float]
            ) -> tuple[dict[int, float], dict[int, float]]:
    """The simulated colocated gen and training that match verl's: the switch's trainer side
    (verl's training, the simulator's hand-overs, which its gen reading holds) moved."""
    side = {n: runs.switch_of(setup, n, 0.0).trainer_s for n in gen}  # bytes: no lead
    return ({n: gen[n] + side[n] for n in gen}, {n: train[n] - side[n] for n in train})


def _seven_b(swapped: bool, log: Callable[[str], None], folder: Path,
             fitted: dict[str, float] | None = None) -> list[str]:
    """The 7B's fits in one cell order, as calibration lines: all three readings; the
    swapped order's lines carry `_swapped`, and its gen-fitted means are the original
    order's (`fitted`): gen is not swapped."""
    seven, reading = runs.SEVEN_B, f", {runs.SWAPPED}" if swapped else ""
    cells = claims.colocate(reading)
    gen, train = targets(seven, {n: cells[n]["gen"] for n in runs.SIZES},
                         {n: cells[n]["old_log_prob"] + cells[n]["update_actor"]
                          for n in runs.SIZES})
    if not swapped:
        lines = _setup_fits("seven_b", seven, gen, train, "fsdp", log, folder)
        log("verl-async 7B, reading 'lengths from gen, per size'")
        per: dict[int | str, float] = {
            n: fit_lengths({n: gen[n]}, "gen_s", 0.3, seven, log, folder) for n in runs.SIZES}
        lines += [f"size_{n} = {per[n]}" for n in runs.SIZES]
        return [*lines, f"per_size_train_mfu = {fit_mfu(per, train, seven, log, folder)}"]
    assert fitted is not None
    log(f"verl-async 7B, {runs.SWAPPED}")
    mfu = fit_mfu(dict.fromkeys(gen, float(fitted["seven_b"])), train, seven, log, folder)
    trained = fit_lengths(train, "train_s", prior_mfu("fsdp"), seven, log, folder)
    per = {n: float(fitted[f"size_{n}"]) for n in runs.SIZES}
    return [f"seven_b_train_mfu_swapped = {mfu}", f"seven_b_from_training_swapped = {trained}",
            f"per_size_train_mfu_swapped = {fit_mfu(per, train, seven, log, folder)}"]


def _one_step(name: str, setup: runs.Setup, log: Callable[[str], None],
              folder: Path) -> list[str]:
    """A one-step-off baseline's fits, where verl publishes generate_sequences beside gen
    (one_step_off_policy/README.md:64, 66): the mean length to generate_sequences (the
    replicas' mean generation, `runs.replica_times`: the switch out of it), the MFU to
    training; then the slowest replica's lead over the mean at that length, which the
    published gen minus generate_sequences also holds, goes to LEADS (and the file)."""
    engine = "FSDP2" if setup.framework == "fsdp" else "Megatron"
    n, _, train_s = claims.SINGLE_TARGETS[name]
    generate = float(claims.ONE_STEP[engine]["generate"])  # type: ignore[arg-type]
    _, train = targets(setup, {n: 0.0}, {n: train_s})
    log(f"verl-async {name}, reading 'lengths from gen' (from generate_sequences)")
    mean = fit_lengths({n: generate}, "generate_s", 0.3, setup, log, folder)
    mfu = fit_mfu({n: mean}, train, setup, log, folder)
    LEADS[setup.framework] = round(_colocated({n: mean}, mfu, setup, (n,), folder)[n]["lead_s"],
                                   2)
    log(f"  {name}: the slowest replica leads the mean by {LEADS[setup.framework]} s")
    log(f"verl-async {name}, reading 'lengths from training' (MFU {prior_mfu(setup.framework)})")
    trained = fit_lengths(train, "train_s", prior_mfu(setup.framework), setup, log, folder)
    return [f"{name} = {mean}", f"{name}_train_mfu = {mfu}", f"{name}_from_training = {trained}"]


def fit(write: bool = True, progress: bool = True) -> dict[str, Any]:
    """Every setup's readings; written to harness/sim/calibration/verl-async.toml."""
    log = say if progress else (lambda _m: None)  # stderr: stdout is the fit's JSON
    with tempfile.TemporaryDirectory(prefix="rolloutbench-verl-fit-") as scratch:
        folder = Path(scratch)  # the fit's traces are scratch: a dry run writes nothing
        LEADS.clear()
        lines = [line for name in ("one_step_fsdp2", "one_step_megatron")
                 for line in _one_step(name, runs.SINGLE[name], log, folder)]
        lines += _seven_b(False, log, folder)
        lines += _seven_b(True, log, folder, _values(lines))
        n, gen_s, train_s = claims.SINGLE_TARGETS["moe"]
        gen, train = targets(runs.MOE, {n: gen_s}, {n: train_s})
        lines += _setup_fits("moe", runs.MOE, gen, train, "megatron", log, folder)
    result = _values(lines)
    if write:
        text = ["# Written by `rolloutbench calibrate verl-async`; re-run it to reproduce.",
                "# Fitted to verl's colocated sync runs only (fully_async_policy/README.md:"
                "354-361, 446; one_step_off_policy/README.md:64, 66); the readings:",
                "# harness/studies/reproduce/verl_async/fit.py.",
                f"# commit: {git_commit()}", "", "[fit]",
                "# the 7B's, reading 'lengths from gen' (every run sets its own: [lengths])",
                f"train_mfu = {result['seven_b_train_mfu']}", "", "[fixed]", *FIXED_NOTES]
        text += [f"{k} = {v}" for k, v in FIXED.items()]
        lead = LEADS.get("fsdp", 0.0)
        text.append(f"switch_s = {round(runs.switch_of(runs.SEVEN_B, 32, lead).handover_s, 4)}")
        text += ["", "[switch]",
                 "# per framework, seconds a step: the slowest replica's lead over the mean in",
                 "# the one-step-off colocated run at its fitted length, taken out of the",
                 "# published gen - generate_sequences (harness/sim/switch.py: imbalance_s)",
                 *[f"{k} = {v}" for k, v in sorted(LEADS.items())]]
        text += ["", "[lengths]",
                 "# per setup (seven_b, moe, one_step_fsdp2, one_step_megatron): NAME, the mean",
                 "# response tokens fitted to gen, with NAME_train_mfu fitted to training;",
                 "# NAME_from_training, the mean fitted to training at the neutral MFU; size_N",
                 "# and per_size_train_mfu, the 7B's per-size reading; _swapped: the 7B's",
                 "# fits with the cells PR #4307 swapped", *lines, *HARDWARE]
        write_atomic(calibration.path_of(runs.PAPER), "\n".join(text) + "\n")
    return result


def _values(lines: list[str]) -> dict[str, float]:
    return {k: float(v) for k, v in (line.split(" = ") for line in lines)}


OWN_MODEL = "qwen2.5-7b"  # the model of verl's 0.12 s weight sync (FIXED_NOTES)
HARDWARE = [
    "", "[hardware]",
    "# the model whose publication weight_sync_s prices, and the trainer the MFU is fitted on",
    f'model = "{OWN_MODEL}"', 'trainer_gpu = "h20"', 'trainer_framework = "fsdp"',
    'source = "verl@1dda039 fully_async_policy/README.md:333-338 (H20, Qwen2.5-Math-7B, '
    'vllm+FSDP2)"',
]
