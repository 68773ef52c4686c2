"""Probe knobs: scale one simulator quantity without touching any configuration.

`rolloutbench reproduce would-need` asks, for each paper number the simulator
misses, what value of one free parameter would reproduce it. Some of those
parameters are not configuration fields (the decode step time at a small batch,
the spread of response lengths between prompts), and a new `SimConfig` field
would change every trace header, golden traces included. So the knobs live
here instead: a `Knobs` value is made active for a block of code with
`active(...)`, every `SimRuntime` built inside the block applies it, and
outside such a block (the default) nothing changes at all.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from harness.sim.perf import StepJump

D = TypeVar("D", bound=StepJump)

FRONTIER_BATCH = 16  # sequences: RolloutPipe's frontier of F_w=2 groups of K=8


@dataclass(frozen=True)
class Knobs:
    """What to change in the simulated runs of a block; every default changes nothing.

    - `small_batch_scale`: multiplies the decode step time of every step that runs
      at most `small_batch` sequences (the engine's speed at a small batch).
    - `spread_scale`: multiplies `sigma_between`, the spread of response lengths
      between prompts, of the workload (every component of a mixture); the mean
      length is kept, since the profile re-solves its median for the cap.
    - `params`: overrides of calibrated parameters (`bw_eff`, `train_mfu`, ...),
      applied after the run's calibration and `SimConfig` overrides.
    """

    small_batch_scale: float | None = None
    small_batch: int = FRONTIER_BATCH
    spread_scale: float | None = None
    params: dict[str, float] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        """The knobs that are set, for a trace header (empty when none is)."""
        out: dict[str, Any] = {}
        if self.small_batch_scale is not None:
            out["small_batch_scale"] = self.small_batch_scale
            out["small_batch"] = self.small_batch
        if self.spread_scale is not None:
            out["spread_scale"] = self.spread_scale
        if self.params:
            out["params"] = dict(self.params)
        return out


_ACTIVE: ContextVar[Knobs | None] = ContextVar("rolloutbench_knobs", default=None)


def current() -> Knobs | None:
    """The knobs of the enclosing `active` block, or None (the default: no change)."""
    return _ACTIVE.get()


@contextlib.contextmanager
def active(knobs: Knobs) -> Iterator[Knobs]:
    """Apply `knobs` to every simulated run started inside the block."""
    token = _ACTIVE.set(knobs)
    try:
        yield knobs
    finally:
        _ACTIVE.reset(token)


def apply_decode(decode: D, knobs: Knobs | None) -> D:
    """The engine's decode model with the small-batch scale applied (if any)."""
    if knobs is None or knobs.small_batch_scale is None:
        return decode
    return dataclasses.replace(decode, small_batch=knobs.small_batch,
                               small_batch_scale=knobs.small_batch_scale)


def apply_params(params: dict[str, float], knobs: Knobs | None) -> dict[str, float]:
    """Calibrated parameters with the knobs' overrides (unknown names are an error)."""
    if knobs is None or not knobs.params:
        return params
    unknown = set(knobs.params) - set(params)
    if unknown:
        raise KeyError(f"knobs: unknown parameter(s) {sorted(unknown)}")
    return {**params, **{k: float(v) for k, v in knobs.params.items()}}


def make_workload(name: str, seed: int, group_size: int, knobs: Knobs | None) -> Any:
    """The run's workload, with the spread between prompts scaled (if asked)."""
    from workloads.profile import Mixture, MixtureWorkload, SimWorkload, load_profile
    from workloads.profile import make_workload as plain

    if knobs is None or knobs.spread_scale is None:
        return plain(name, seed, group_size)
    profile = load_profile(name)
    if isinstance(profile, Mixture):
        parts = tuple(scale_spread(p, knobs.spread_scale) for p in profile.components)
        return MixtureWorkload(dataclasses.replace(profile, components=parts), seed,
                               group_size)
    return SimWorkload(scale_spread(profile, knobs.spread_scale), seed, group_size)


def scale_spread(profile: Any, scale: float) -> Any:
    """A profile whose between-prompt spread is `scale` times its own."""
    return dataclasses.replace(profile, sigma_between=profile.sigma_between * scale)
