"""Calibrated simulator parameters, one committed TOML file per calibration.

`[fit]` holds the values `rolloutbench calibrate` fitted to baseline
observations; `[fixed]` holds documented priors that are not fitted. A run's
`SimConfig` may override any of them.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

PARAMS = ("bw_eff", "step_overhead_s", "compute_eff", "train_mfu", "micro_overhead_s",
          "weight_sync_s", "materialize_s", "drift", "switch_s")


def path_of(name: str) -> Path:
    return Path(str(resources.files("harness.sim.calibration") / f"{name}.toml"))


def load(name: str) -> dict[str, Any]:
    path = path_of(name)
    if not path.exists():
        raise FileNotFoundError(f"no calibration named {name!r} ({path})")
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def resolve(sim: Any) -> dict[str, float]:
    """The parameter values a run uses: calibration file, then config overrides."""
    data = load(sim.calibration)
    values = {**data.get("fixed", {}), **data.get("fit", {})}
    out = {}
    for name in PARAMS:
        override = getattr(sim, name)
        out[name] = float(override if override is not None else values[name])
    return out
