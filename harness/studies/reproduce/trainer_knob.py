"""Which trainer knob a reproduction fits or searches, and the fit of a linear trainer.

Under the kernel trainer (`sim.train_model = "kernels"`, the default) a run's trainer is
priced from measured kernels, and its one calibratable speed is `train_scale` (kernel time
over the database's kernels); on the MFU line (a trainer GPU the database has no kernels
for, a set `sim.train_mfu`, a measured `[train]` table) it is `train_mfu`. A calibration
fits whichever prices its paper's baseline, and a would-need family searches the same one:
a `train_mfu` probe of a kernel-priced run would switch it to another model, not move it.

A trainer's time is linear in the knob's effect: A + B / train_mfu on the MFU line, and
A + B x train_scale under the kernel trainer for Megatron's layout (the scale multiplies
the kernels; fixed costs, collectives and the optimizer step are A). So two runs give A
and B exactly (`linear`), and a fit to many observations needs no further simulation.
FSDP's gathers overlap the kernels (max(kernels, gathers)), which is linear only where the
kernels are the longer: a fit of an FSDP trainer checks its result with one more run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

from harness.core.config import RunConfig
from harness.sim import calibration
from harness.sim.trainer.build import mfu_line_reason

MFU, SCALE = "train_mfu", "train_scale"


def knob(cfg: RunConfig) -> str:
    """`train_scale` where the kernel trainer prices this run's trainer, else `train_mfu`."""
    data = calibration.load(cfg.sim.calibration)
    return SCALE if mfu_line_reason(cfg.sim, data) is None else MFU


@dataclass(frozen=True)
class Knob:
    """A trainer knob's two probe values, search range and the transform g with time =
    A + B g(x)."""

    name: str
    probes: tuple[float, float]
    lo: float
    hi: float

    def g(self, x: float) -> float:
        return 1.0 / x if self.name == MFU else x


KNOBS = {MFU: Knob(MFU, (0.05, 0.10), 0.005, 0.9),
         SCALE: Knob(SCALE, (1.0, 2.0), 0.1, 50.0)}


def linear(k: Knob, at_1: Mapping[Hashable, float], at_2: Mapping[Hashable, float]
           ) -> dict[Hashable, tuple[float, float]]:
    """(A, B) per cell from its times at the knob's two probe values."""
    g1, g2 = (k.g(p) for p in k.probes)
    out = {}
    for cell, t1 in at_1.items():
        b = (t1 - at_2[cell]) / (g1 - g2)
        out[cell] = (t1 - b * g1, b)
    return out


def fit_log(k: Knob, ab: Mapping[Hashable, tuple[float, float]],
            observed: Mapping[Hashable, float]) -> tuple[float, float]:
    """The knob's value minimising the squared log error of A + B g(x) against the
    observations (golden-section search in log x), and the rms log error there."""

    def loss(x: float) -> float:
        return sum((math.log(ab[c][0] + ab[c][1] * k.g(x)) - math.log(t)) ** 2
                   for c, t in observed.items())

    lo, hi = math.log(k.lo), math.log(k.hi)
    for _ in range(100):
        x1, x2 = hi - 0.618 * (hi - lo), lo + 0.618 * (hi - lo)
        lo, hi = (lo, x2) if loss(math.exp(x1)) < loss(math.exp(x2)) else (x1, hi)
    x = math.exp((lo + hi) / 2)
    return x, math.sqrt(loss(x) / len(observed))


def bisect(f: Callable[[float], float], name: str, a: float, b: float, target: float,
           iters: int, log: Callable[[str], None]) -> float:
    """Solve f(x) = target in [a, b] for a share f that falls with the MFU and rises with
    the scale, by bisection in log space."""
    for _ in range(iters):
        mid = math.sqrt(a * b)
        value = f(mid)
        log(f"  {name}={mid:.4f} -> share {value:.3f}")
        a, b = (mid, b) if (value > target) == (name == MFU) else (a, mid)
    return math.sqrt(a * b)
