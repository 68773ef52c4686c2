"""Calibrated simulator parameters, one committed TOML file per calibration.

A calibration may also be any TOML file of the same shape, named by its path
(`sim.calibration = "runs/calibration/HOST/cpu-live.toml"`): a live engine's
calibration is measured on the machine that uses it and stays with the results.

`[fit]` holds the values `rolloutbench calibrate` fitted to baseline
observations; `[fixed]` holds documented priors that are not fitted. A run's
`SimConfig` may override any of them. `[hardware]` names the trainer GPU and
framework the `train_mfu` belongs to: a run that trains on another GPU gets a
neutral prior instead, said once when it runs (`harness.sim.trainer_mfu`); and the
model its `weight_sync_s` publishes: a run of another model or on another trainer GPU is
priced by the transfer model instead (`harness.sim.weight_sync`), said once.
"""

from __future__ import annotations

import json
import pickle
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from harness.core.files import parse_toml
from harness.sim import weight_sync
from harness.sim.trainer import speed as trainer_speed
from harness.sim.trainer_mfu import Assumed, assumed

PARAMS = ("bw_eff", "step_overhead_s", "compute_eff", "train_mfu", "micro_overhead_s",
          "weight_sync_s", "materialize_s", "drift", "switch_s")


def names() -> list[str]:
    """The committed calibrations, by name."""
    folder = resources.files("harness.sim.calibration")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def path_of(name: str) -> Path:
    """A committed calibration by name, or a calibration file by path (a name that
    ends in .toml or holds a '/': what `calibrate engine --out` wrote)."""
    if name.endswith(".toml") or "/" in name:
        return Path(name)
    return Path(str(resources.files("harness.sim.calibration") / f"{name}.toml"))


# a calibration file as parsed, by its bytes: a run reads its calibration four times as
# it starts and a reproduction runs many, and parsing the TOML costs 50 times what a copy
# from pickled bytes does (each caller gets its own copy, free to change it)
_PARSED: dict[bytes, bytes] = {}
PARSED_KEPT = 32


def load(name: str) -> dict[str, Any]:
    path = path_of(name)
    if not path.exists():
        raise FileNotFoundError(f"no calibration named {name!r} ({path})")
    raw = path.read_bytes()
    parsed = _PARSED.get(raw)
    if parsed is None:
        try:
            data = parse_toml(raw)  # what tomllib.load does with the file
        except tomllib.TOMLDecodeError as err:
            raise ValueError(f"calibration {path}: not a TOML file ({err})") from None
        if len(_PARSED) >= PARSED_KEPT:
            del _PARSED[next(iter(_PARSED))]
        parsed = _PARSED[raw] = pickle.dumps(data, pickle.HIGHEST_PROTOCOL)
    return pickle.loads(parsed)  # noqa: S301 - bytes this process pickled itself


def resolve(sim: Any) -> dict[str, float]:
    """The parameter values a run uses: calibration file, then config overrides; a
    `train_mfu` fitted to another trainer GPU than the run's becomes the neutral prior
    for the run's GPU (`trainer_mfu.assumed`). Silent: a check that resolves a config
    and then refuses it prints its one line alone."""
    data = load(sim.calibration)
    values = {**data.get("fixed", {}), **data.get("fit", {})}
    out = {}
    for name in PARAMS:
        override = getattr(sim, name)
        if override is None and name not in values:
            raise ValueError(f"calibration {path_of(sim.calibration)} has no value for {name!r}")
        out[name] = float(override if override is not None else values[name])
    if sim.weight_sync_s is None:  # own model and GPU: the calibration's; else the model's
        out["weight_sync_s"] = weight_sync.charge(sim, data, out["weight_sync_s"])
    speed = trainer_speed.resolve(sim, data)  # the kernel trainer's (unused on the MFU line)
    out["train_scale"], out["train_step_fixed_s"] = speed.scale, speed.step_fixed_s
    neutral = assumed(sim, data, out["train_mfu"])
    if neutral is not None:  # said when the run starts (`say_train_mfu`), not in checks
        out["train_mfu"] = neutral.value
    return out


def hardware_lines(name: str) -> list[str]:
    """The `[hardware]` table of a committed calibration, as lines to write back: the
    trainer a fit belongs to is a fact of the paper, which a refit keeps."""
    hardware = load(name).get("hardware")
    if not hardware:
        return []
    return ["", "[hardware]"] + [f"{key} = {json.dumps(value)}" for key, value in hardware.items()]


def _assumed_for(sim: Any) -> tuple[Assumed | None, float]:
    """`assumed` for a config alone (its calibration loaded), and the calibration's value."""
    data = load(sim.calibration)
    fitted = float({**data.get("fixed", {}), **data.get("fit", {})}.get("train_mfu", 0.0))
    return assumed(sim, data, fitted), fitted


def say_train_mfu(sim: Any) -> None:
    """Say, once per process, where this run's trainer and weight sync depart from the
    calibration: the transfer model pricing its weight sync; on the kernel trainer a
    calibration's scale set aside for another GPU; on the MFU line a GPU the database
    lacks and a neutral MFU prior (nothing when none applies)."""
    from harness.core.notes import say_once
    from harness.sim.trainer import build

    data = load(sim.calibration)
    values = {**data.get("fixed", {}), **data.get("fit", {})}
    if "weight_sync_s" in values:
        weight_sync.say(sim, data, float(values["weight_sync_s"]))
    reason = build.mfu_line_reason(sim, data)
    if reason is None:
        note = trainer_speed.resolve(sim, data).note
        if note:
            say_once(note)
        return
    if reason.startswith("the kernel database"):
        say_once(f"sim.train_model=kernels: {reason}")
    neutral, _ = _assumed_for(sim)
    if neutral is not None:
        say_once(neutral.note())


def describe_train_mfu(sim: Any) -> str:
    """How a run's trainer is priced, for a one-line summary (`plan`'s "trainer:" line):
    the kernel trainer with its scale's source, or the MFU line with the MFU's (the run's
    own, the calibration's, or a neutral prior)."""
    from harness.sim.trainer import build

    data = load(sim.calibration)
    if build.mfu_line_reason(sim, data) is None:
        speed = trainer_speed.resolve(sim, data)
        fixed = f", {speed.step_fixed_s:g} s a step fixed" if speed.step_fixed_s else ""
        return (f"measured kernels ({trainer_speed.framework_of(data)}, scale "
                f"{speed.scale:g}{fixed})")
    if sim.train_mfu is not None:
        return f"MFU {sim.train_mfu:g} (sim.train_mfu)"
    neutral, fitted = _assumed_for(sim)
    if neutral is not None:
        return f"MFU {neutral.value:g}, a neutral prior for {neutral.gpu}"
    return f"MFU {fitted:g}, calibration {sim.calibration}'s"
