"""The trainer's MFU on a GPU its calibration was not fitted to.

A calibration's `train_mfu` belongs to one paper's trainer: RolloutPipe's 0.058 is
Megatron on RTX 4090s over PCIe. Applied to any other GPU it silently prices training
at that cluster's efficiency (999.6 s a round on L20s against about 194 s at 30%). So
each calibration file names the trainer GPU and framework its `train_mfu` belongs to
(its `[hardware]` table), and a run whose trainer GPU is another one, with no
`sim.train_mfu` of its own, gets a neutral prior for that GPU's class and the
framework (`presets/trainer_mfu.toml`), said once per process when a run starts
(`say`: the simulated runtime, and `plan` before its workers fork, so they inherit it
as said). On the calibration's own GPU nothing changes. A calibration with a measured
`[train]` table (a live machine's) or without a `[hardware]` table (a user's own file)
is taken as it is.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

TABLE = "harness/sim/presets/trainer_mfu.toml"
SCALE_UP_LINKS = ("nvlink", "infinity-fabric")  # a preset's `link` that joins GPUs directly
CLASS_NAMES = {"scale_up": "NVLink or Infinity Fabric", "pcie": "PCIe"}


@dataclass(frozen=True)
class Assumed:
    """A neutral `train_mfu` standing in for the calibration's, and why."""

    value: float
    gpu: str  # the run's trainer GPU (the rollout GPU when colocated)
    gpu_class: str  # scale_up or pcie
    framework: str
    calibration: str
    fitted: float  # the calibration's own value, not used
    fitted_gpu: str

    def note(self) -> str:
        """The value, the GPU, the source and the override, in one line (say_once wraps it
        to 100 columns)."""
        return (f"sim.train_mfu = {self.value:g} assumed: the trainer runs on {self.gpu}, and "
                f"calibration {self.calibration}'s {self.fitted:g} belongs to "
                f"{self.fitted_gpu} trainers; {self.value:g} is a neutral prior for "
                f"{self.framework} on {CLASS_NAMES[self.gpu_class]} GPUs, not a fit ({TABLE}). "
                f"Your own: --set sim.train_mfu=VALUE")


@cache
def table() -> dict[str, dict[str, float]]:
    """framework -> GPU class -> neutral MFU."""
    text = resources.files("harness.sim").joinpath("presets", "trainer_mfu.toml")
    return tomllib.loads(text.read_text("utf-8"))


def gpu_class(link: str) -> str:
    """scale_up for GPUs joined by NVLink or Infinity Fabric, else pcie."""
    return "scale_up" if link.lower().startswith(SCALE_UP_LINKS) else "pcie"


def trainer_gpu(sim: Any) -> str:
    """The GPU the trainer runs on: colocated, the rollout GPUs themselves."""
    return str(sim.rollout_gpu if sim.placement == "colocated" else sim.trainer_gpu)


def assumed(sim: Any, data: dict[str, Any], fitted: float) -> Assumed | None:
    """The neutral MFU this run trains at instead of the calibration's `fitted` one,
    or None when the calibration's value stands (see the module's docstring)."""
    from harness.sim.presets import load_hardware

    hardware = data.get("hardware", {})
    if sim.train_mfu is not None or "train" in data or "trainer_gpu" not in hardware:
        return None
    gpu = trainer_gpu(sim)
    if gpu.lower() == str(hardware["trainer_gpu"]).lower():
        return None
    try:
        link = load_hardware(gpu).link
    except (KeyError, ValueError):  # an unknown or bad preset: its own check says so
        return None
    framework = str(hardware.get("trainer_framework", "megatron"))
    rows = table()
    row = rows.get(framework, rows["megatron"])
    cls = gpu_class(link)
    return Assumed(float(row[cls]), gpu, cls, framework if framework in rows else "megatron",
                   str(sim.calibration), fitted, str(hardware["trainer_gpu"]))
