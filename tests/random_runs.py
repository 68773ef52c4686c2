"""Random valid runs of any system for the property tests (tests/test_properties.py):
a system's knobs, a cheap workload profile, a small shape, a seed and a few simulator
knobs, drawn by Hypothesis; what each run must keep is that file's concern."""

from __future__ import annotations

from hypothesis import assume
from hypothesis import strategies as st

from harness.cli.common import build_config
from harness.core.config import ConfigError, RunConfig
from systems import SYSTEMS
from systems.april import APRIL
from systems.rollpacker import RollPacker

WORKLOADS = ("sci-jl", "orz-math", "rp-code", "rp-mix", "arith")
@st.composite
def settings_for(draw: st.DrawFn, system: str) -> list[str]:
    """`--set` assignments for one run of `system` (valid or rejected by build_config)."""
    u = draw(st.sampled_from([1, 2]))
    k = draw(st.integers(2, 4))
    sets = {
        "system": system,
        "workload": draw(st.sampled_from(WORKLOADS)),
        "seed": draw(st.integers(0, 2**16)),
        "rounds": draw(st.integers(1, 3)),
        "update_groups": u,
        "groups": u * draw(st.integers(1, 4)),
        "group_size": k,
        "max_response_tokens": draw(st.sampled_from([0, 64, 512, 2048])),
        "sim.rollout_engines": draw(st.integers(1, 3)),
        "sim.rollout_tp": draw(st.sampled_from([1, 2])),
        "sim.placement": draw(st.sampled_from(["disaggregated", "colocated"])),
        "sim.mem_fraction": draw(st.sampled_from([0.2, 0.3, 0.85])),
        "sim.max_running": draw(st.sampled_from([2, 8, 1024])),
        "sim.verifier_workers": draw(st.integers(0, 3)),
        "sim.micro_batch_tokens": draw(st.sampled_from([1024, 16384])),
        # 0: a step shares its time with the next rollout_start (the regression test below)
        "sim.weight_sync_s": draw(st.sampled_from([0.0, 0.5, 2.0])),
    }
    if system == "cgp-fgd":
        sets["frontier"] = draw(st.integers(1, 4))
    if system == "pipelinerl":
        sets["concurrency"] = k * draw(st.integers(1, 3))
        sets["max_lag"] = draw(st.sampled_from([-1, 0, 1, 3]))
    if system == "sortedrl":
        sets["max_lag"] = draw(st.sampled_from([-1, 0, 1, 3]))
    if issubclass(SYSTEMS[system], APRIL):
        over = draw(st.one_of(st.none(), st.just(0),  # unset: the paper's 2R; 0: none
                              st.integers(sets["groups"], 2 * sets["groups"])))
        if over is not None:
            sets["over_sampling_groups"] = over
        sets["partial_rollout"] = draw(st.booleans())
        sets["dynamic_sampling"] = draw(st.booleans())
    if system == "roll-flash":  # 0: synchronous; 1.5: a fractional window's share
        sets["roll_flash.async_generation_ratio"] = draw(st.sampled_from([0, 1, 1.5, 2]))
        sets["roll_flash.max_running_requests"] = draw(st.sampled_from([1, 3, 128]))
    if system == "verl-dynamic":  # lends as verl's policies decide, with and without the gate
        sets["verl_dynamic.policy"] = draw(st.sampled_from(["default", "fixed_ratio"]))
        sets["verl_dynamic.enable_rebalance"] = draw(st.booleans())
        sets["verl_dynamic.deactivate_ratio"] = draw(st.sampled_from([0.3, 0.6, 1.0]))
    if system == "seer":  # 0: whole requests; 64: chunks shorter than most responses
        sets["seer.chunk_tokens"] = draw(st.sampled_from([0, 64, 8192]))
        sets["seer.context_aware"] = draw(st.booleans())
    if system == "tlt":  # speculate always or at batch <= 2; the drafter every step or 10
        sets["tlt.bs_threshold"] = draw(st.sampled_from([0, 2, 32]))
        sets["tlt.training_interval_steps"] = draw(st.sampled_from([1, 10]))
        sets["tlt.drafter_steps"] = draw(st.sampled_from([0, 100]))
    if system == "laminar":  # batches of 1 group to all of them; repack off, eager, half
        sets["laminar.batch_groups"] = draw(st.sampled_from([1, 2, 8]))
        sets["laminar.repack_fraction"] = draw(st.sampled_from([0.0, 0.25, 0.5]))
        sets["laminar.max_staleness"] = draw(st.sampled_from([-1, 0, 2]))
    if issubclass(SYSTEMS[system], RollPacker):
        for knob in ("tail_batching", "reward_scheduler", "planner", "stream_trainer"):
            sets[f"rollpacker_{knob}"] = draw(st.booleans())
        sets["rollpacker_speculation"] = draw(st.sampled_from([1.0, 1.25, 2.0]))
        sets["rollpacker_response_speculation"] = draw(st.sampled_from([1.0, 1.5]))
        sets["rollpacker_stream_at"] = draw(st.sampled_from([0.0, 0.25, 0.5]))
    return [f"{key}={str(v).lower() if isinstance(v, bool) else v}" for key, v in sets.items()]


def configure(sets: list[str]) -> RunConfig:
    """The config the CLI would run, or a rejected example (KV cache too small)."""
    try:
        return build_config(None, sets)
    except ConfigError:
        assume(False)
        raise
