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
    system: str  # aiconfigurator-core's GPU name, e.g. "a100_sxm"
    decode_scale: float
    prefill_scale: float
    comm: str  # "measured" or "preset-link"
    note: str

    @property
    def direct(self) -> bool:
        """Measured on this very GPU (no scale, measured all-reduce)."""
        return (self.decode_scale == 1.0 and self.prefill_scale == 1.0
                and self.comm == "measured" and self.note == "measured on this GPU")


@cache
def _table() -> dict[str, dict[str, object]]:
    text = resources.files("harness.sim").joinpath("presets", "kernel_gpus.toml").read_text()
    return tomllib.loads(text)


def kernel_gpu(preset: str) -> KernelGpu | None:
    """The database GPU of a hardware preset, or None where the database has none."""
    raw = _table().get(preset)
    if raw is None:
        return None
    return KernelGpu(preset, str(raw["system"]), float(raw["decode_scale"]),  # type: ignore[arg-type]
                     float(raw["prefill_scale"]), str(raw["comm"]), str(raw["note"]))  # type: ignore[arg-type]
