"""Which measured-kernel GPU prices each hardware preset (presets/kernel_gpus.toml)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources


@dataclass(frozen=True)
class KernelGpu:
    """A preset's stand-in in the database, and how its times are carried over."""

    preset: str
    stand_in: bool  # another GPU's tables (False: measured on this very GPU)
    system: str  # aiconfigurator-core's GPU name, e.g. "a100_sxm"
    decode_scale: float
    prefill_scale: float
    comm: str  # "measured" or "preset-link"
    note: str
    rule: str = "scale"  # "scale": the two scales above; "per-op": kernels/standin.py
    source: str = ""  # per-op: the hardware preset of `system` (the GPU measured)


@cache
def _table() -> dict[str, KernelGpu]:
    text = resources.files("harness.sim").joinpath("presets", "kernel_gpus.toml").read_text()
    return {name: KernelGpu(name, bool(raw["stand_in"]), str(raw["system"]),
                            float(raw["decode_scale"]), float(raw["prefill_scale"]),
                            str(raw["comm"]), str(raw["note"]), str(raw.get("rule", "scale")),
                            str(raw.get("source", "")))
            for name, raw in tomllib.loads(text).items()}


def kernel_gpu(preset: str) -> KernelGpu | None:
    """The database GPU of a hardware preset, or None where the database has none. Names
    match without regard to case, as presets do (`--gpu H100-SXM` is `h100-sxm`): an exact
    lookup sent `steps --gpu H100-SXM` silently to the roofline."""
    return _table().get(preset.lower())
