"""Each system's knobs as a plan sees them: the values it tries, the staleness knob of
each asynchronous system, the placements a system allows and the least lag it can run at.

Split from `space.py` (the layouts and the points): this is what a plan knows of the
systems; that, how it enumerates a cluster.
"""

from __future__ import annotations

import math
from typing import Any

from harness.studies.plan.recipe import Plan

ONE_STEP_PER_ROLLOUT = ("april", "rollpacker")  # one optimizer step per round: U must be R
# The asynchronous systems of #28: each generates on its own GPUs while its trainer
# trains, and trains tokens of older policies (none promises lag 0 at every setting),
# with its staleness knob and the values a plan tries (those within --max-lag).
ASYNC_STALENESS = {
    "areal": ("areal.max_head_offpolicyness", (0, 1, 2, 4)),
    "skyrl-async": ("skyrl.max_staleness_steps", (0, 1, 2, 4)),
    "prime-rl": ("prime_rl.max_off_policy_steps", (1, 2, 4, 8)),
    "nemo-rl-async": ("nemo_rl.max_trajectory_age_steps", (1, 2, 4)),
    "tinker": ("tinker.max_steps_off_policy", (0, 1, 2, 4)),
    "verl-fully-async": ("verl_async.staleness_threshold", (0.0, 0.1, 0.3, 0.5)),
    "roll-flash": ("roll_flash.async_generation_ratio", (0, 1, 2, 4)),
    "laminar": ("laminar.max_staleness", (0, 1, 2, 4)),  # its default -1 (none) too
    "verl-dynamic": ("verl_async.staleness_threshold", (0.0, 0.1, 0.3, 0.5)),
    "verl-one-step-off": None,  # one step off by construction: no knob
    "slime-async": None,  # no staleness knob: its pool (POOL_KNOB) sets how stale it runs
}
POOL_KNOB = "slime_async.sglang_server_concurrency"
"""slime-async's one knob: groups its worker keeps in flight across rollouts (slime's
default 512 puts every group of a short run in flight at once). A plan tries U, 2U,
4U, R, 2R and 512 groups."""
DISAGGREGATED_ONLY = {
    "pipelinerl": "in-flight weight updates need the engine and trainer on their own GPUs",
    "cgp-tail": "CGP's hand-off trains during the rollout, on the trainer's own GPUs",
    **dict.fromkeys(ASYNC_STALENESS, "an asynchronous system: rollout and trainer on their "
                    "own GPUs"),
}
COLOCATED_ONLY = {"verl": "veRL's baseline is colocated by definition"}


def knob_choices(system: str, plan: Plan) -> dict[str, list[Any]]:
    """Each knob (a RunConfig field) the system reads, with the values tried."""
    r, k = plan.recipe.groups, plan.recipe.group_size
    bound = plan.limits.lag_bound
    if system == "cgp-fgd":
        return {"frontier": sorted({*(2**i for i in range(8) if 2**i < r), r})}
    if system == "pipelinerl":
        lags = [-1, 0, 1, 2, 4, 8] if bound is None else [v for v in (0, 1, 2, 4, 8)
                                                           if v <= bound]
        return {"concurrency": [k * 2**i for i in range(1, 8)], "max_lag": lags}
    if system == "laminar":  # PipelineRL's admission rule, and whether to repack
        lags = [-1, 0, 1, 2, 4] if bound is None else [v for v in (0, 1, 2, 4) if v <= bound]
        return {"laminar.max_staleness": lags or [0],
                "laminar.repack_fraction": [0.0, 0.125, 0.25]}
    if system in ("april", "cgp-april"):
        over = sorted({r, math.ceil(1.25 * r), math.ceil(1.5 * r), 2 * r})
        return {"over_sampling_groups": over,
                "partial_rollout": [False] if plan.limits.on_policy else [True, False]}
    if system in ASYNC_STALENESS:
        knob = ASYNC_STALENESS[system]
        if system == "slime-async":
            u = plan.recipe.update_groups
            return {POOL_KNOB: sorted({u, 2 * u, 4 * u, r, 2 * r, 512})}
        if knob is None:
            return {}
        name, values = knob
        if name.startswith("verl_async."):  # a share of stale samples, not steps
            return {name: list(values)}
        return {name: [v for v in values if bound is None or v <= bound] or [values[0]]}
    if system in ("rollpacker", "cgp-tail"):
        knobs: dict[str, list[Any]] = {
            "rollpacker_speculation": [1.0, 1.25, 1.5, 2.0],
            "rollpacker_response_speculation": [1.0, 1.25, 1.5],
            "rollpacker_reward_scheduler": [True, False],
            "rollpacker_planner": [True, False],
        }
        if system == "rollpacker":
            knobs["rollpacker_tail_batching"] = [True, False]
            knobs["rollpacker_stream_trainer"] = [True, False]  # colocated only (`Point`)
        return knobs
    return {}


SHORT = {"frontier": "Fw", "concurrency": "H", "max_lag": "lag", "over_sampling_groups": "over",
         "partial_rollout": "partial", "rollpacker_speculation": "etaP",
         "rollpacker_response_speculation": "etaR", "rollpacker_reward_scheduler": "rs",
         "rollpacker_planner": "plan", "rollpacker_tail_batching": "tail",
         "rollpacker_stream_trainer": "stream", "areal.max_head_offpolicyness": "ofp",
         "skyrl.max_staleness_steps": "S", "prime_rl.max_off_policy_steps": "M",
         "nemo_rl.max_trajectory_age_steps": "age", "tinker.max_steps_off_policy": "off",
         "verl_async.staleness_threshold": "s", "roll_flash.async_generation_ratio": "ratio",
         "laminar.max_staleness": "adm", "laminar.repack_fraction": "repack",
         "tlt.bs_threshold": "bs", "tlt.training_interval_steps": "interval",
         "seer.chunk_tokens": "chunk", "seer.context_aware": "ctx",
         "verl_dynamic.policy": "pol", "verl_dynamic.deactivate_ratio": "deact",
         POOL_KNOB: "C"}


FIXED_LAG = {"verl-one-step-off": (1, "it trains every batch one step off its policy")}
"""The lag of an asynchronous system that has no staleness knob to lower it."""


def least_lag(system: str) -> tuple[int, str] | None:
    """The least lag a system's settings allow, in optimizer steps, and why (None: a
    setting of lag 0 exists, or the knob is not counted in steps: verl's stale-sample
    share)."""
    if system in FIXED_LAG:
        return FIXED_LAG[system]
    knob = ASYNC_STALENESS.get(system)
    if knob is None or knob[0].startswith("verl_async."):
        return None
    name, values = knob
    return min(values), f"its least staleness setting is {name} = {min(values)}"
