"""A run's engine step model with speculative decoding on (`sim.spec_drafter`): the
engine's own step model, and a draft model's priced the same way, wrapped by
`speculative.wrap`. Apart from `speculative` because it reaches the kernel source (which
resolves engines, whose KV capacity `speculative.memory` feeds)."""

from __future__ import annotations

import copy
from typing import Any

from harness.sim import speculative
from harness.sim.kernels import source
from harness.sim.perf import StepJump
from harness.sim.presets import load_model


def draft_step(sim: Any, params: dict[str, float], tp: int) -> StepJump:
    """The draft model's step model: its own engine on the target's GPUs, framework and
    TP, priced by the run's step model (measured kernels where they cover it)."""
    speculative.draft_model(sim)  # an unknown preset: one line naming the field
    draft = copy.copy(sim)
    draft.model, draft.spec_drafter = sim.spec_draft_model, "off"
    return source.decode_model(draft, params, tp)


def with_spec(sim: Any, params: dict[str, float], tp: int, base: StepJump,
              workload: str | None = None, version: int = 0) -> StepJump:
    """`base` as it is with speculation off; else its speculative step (`SpecStep`) at
    policy `version` (an engine built after some updates: a resize)."""
    if sim.spec_drafter == "off":
        return base
    draft = draft_step(sim, params, tp) if sim.spec_drafter == "draft" else None
    return speculative.wrap(sim, base, load_model(sim.model), workload, draft, version)
