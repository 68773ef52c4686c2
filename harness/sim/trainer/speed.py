"""The kernel trainer's two calibratable numbers for a run, and where each comes from.

A calibration fits the trainer to its paper's baseline observations. Under the kernel
trainer it fits `train_scale` (the training stack's kernel time over the database's
kernels) and, where the baseline is published at two or more GPU counts,
`train_step_fixed_s` (seconds per optimizer step that do not shrink with GPUs). Both
belong to the trainer GPU the calibration names in `[hardware] trainer_gpu`, as its
`train_mfu` does (`harness.sim.trainer_mfu`): a run that trains on another GPU takes the
framework's measured constant instead (`constants.FRAMEWORKS`, fitted on measured steps)
and no per-step fixed cost, said once. A calibration without a `[hardware]` table (a
user's own file) is taken as it is; a run's own `sim.train_scale` or
`sim.train_step_fixed_s` always wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.sim.trainer import constants
from harness.sim.trainer_mfu import trainer_gpu

NAMES = ("train_scale", "train_step_fixed_s")


def framework_of(data: dict[str, Any]) -> str:
    """The calibration's trainer framework (megatron when it names none)."""
    return str(data.get("hardware", {}).get("trainer_framework", "megatron"))


def framework_scale(framework: str) -> float:
    """The framework's measured kernel-time scale (fsdp's for a framework not measured)."""
    return constants.FRAMEWORKS.get(framework, constants.FRAMEWORKS["fsdp"])["scale"]


@dataclass(frozen=True)
class Speed:
    """The resolved `train_scale` and `train_step_fixed_s`, and a note when the
    calibration's own fit was set aside for another GPU (None otherwise)."""

    scale: float
    step_fixed_s: float
    note: str | None = None


def own_gpu(sim: Any, data: dict[str, Any]) -> bool:
    """Whether the calibration's fits belong to this run's trainer GPU."""
    hardware = data.get("hardware", {})
    if "trainer_gpu" not in hardware:
        return True
    return trainer_gpu(sim).lower() == str(hardware["trainer_gpu"]).lower()


def calibrated(sim: Any, data: dict[str, Any], name: str) -> bool:
    """Whether the calibration's own `name` (one of NAMES) is what this run takes."""
    fit = {**data.get("fixed", {}), **data.get("fit", {})}
    return name in fit and own_gpu(sim, data)


def resolve(sim: Any, data: dict[str, Any]) -> Speed:
    """This run's kernel-trainer numbers (see the module's docstring)."""
    fit = {**data.get("fixed", {}), **data.get("fit", {})}
    framework = framework_of(data)
    mine = own_gpu(sim, data)
    scale = sim.train_scale
    note = None
    if scale is None:
        if mine and "train_scale" in fit:
            scale = float(fit["train_scale"])
        else:
            scale = framework_scale(framework)
            if "train_scale" in fit:
                note = (f"sim.train_scale = {scale:g}: {framework}'s measured constant "
                        f"(harness/sim/trainer/constants.py); calibration {sim.calibration}'s "
                        f"{float(fit['train_scale']):g} belongs to "
                        f"{data['hardware']['trainer_gpu']} trainers")
    fixed = sim.train_step_fixed_s
    if fixed is None:
        fixed = float(fit.get("train_step_fixed_s", 0.0)) if mine else 0.0
    return Speed(float(scale), float(fixed), note)
