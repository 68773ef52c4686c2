"""Replicas an engine pool borrows on the trainer's GPUs (verl's hybrid replicas).

verl's dynamic resource scheduling (verl-project/verl@1dda039:verl/experimental/
fully_async_policy/dynamic_schedule/, cited as ds/) runs rollout replicas on the
trainer's GPUs while the trainer waits for samples: activation syncs the weights to them
by the naive (same-GPU) backend and wakes them (dynamic_resource_controller.py:97-136),
deactivation removes them from the router, aborts their requests and puts them to sleep
(:138-160), which gives the memory back to the training engine (ds/README.md:63).

What a lend costs here: the colocated hand-over of the system's framework on the
trainer's GPUs (harness/sim/switch.py, one hand-over each way: the engine woken, then put
to sleep; `sim.switch_s` when the run sets it) and, on the way in, a CUDA IPC publication
of the weights on those GPUs (harness/sim/weight_sync.py, colocated). A lent replica is
the engine priced on the trainer's GPU preset with the lend's memory fraction (verl's
hybrid `gpu_memory_utilization`, ds/README.md:105).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from harness.sim import switch, weight_sync
from harness.sim.engine_spec import kv_capacity_tokens


@dataclass(frozen=True)
class LendCost:
    """Seconds of a lend's two sides: wake and weights in, sleep out."""

    handover_s: float  # one hand-over of the GPUs (each way)
    sync_s: float  # the weights published to the lent replicas over CUDA IPC


def lend_cost(cfg: Any, calibration_data: dict[str, Any]) -> LendCost:
    """The run's lend cost: its framework's colocated hand-over on the trainer's GPUs
    (`sim.switch_s` when set) and an IPC publication there."""
    s = cfg.sim
    if s.switch_s is not None:
        handover = float(s.switch_s)
    else:
        framework = switch.framework_for(cfg.system, calibration_data) or "fsdp"
        sw = switch.switch(framework, s.model, s.trainer_gpu, s.trainer_gpus, s.rollout_tp,
                           0, switch.lead_s(framework))
        handover = round(sw.handover_s, 4)  # to 0.1 ms, as `switch.handover_of` keeps it
    sync = weight_sync.predict_sync_s(s.model, s.trainer_gpu, s.trainer_gpus, s.trainer_gpus,
                                      path="ipc", colocated=True)
    return LendCost(handover, round(sync, 4))


def hybrid_cfg(cfg: Any, memory_fraction: float) -> Any:
    """The run's config as a lent replica sees it: the trainer's GPU, its memory share."""
    return replace(cfg, sim=replace(cfg.sim, rollout_gpu=cfg.sim.trainer_gpu,
                                    mem_fraction=memory_fraction))


def hybrid_kv_tokens(cfg: Any, memory_fraction: float) -> int:
    """KV-cache tokens of one lent replica; refused in one line when the weights leave
    none (a lend would start replicas that cannot hold one sequence)."""
    tokens = kv_capacity_tokens(hybrid_cfg(cfg, memory_fraction), cfg.sim.rollout_tp)
    if tokens <= 0:
        raise ValueError(f"lend: memory_fraction={memory_fraction:g} of a "
                         f"{cfg.sim.trainer_gpu} leaves no KV cache for {cfg.sim.model} at "
                         f"TP {cfg.sim.rollout_tp}")
    return tokens


@dataclass
class Lender:
    """What an `EnginePool` needs to lend: how to build a replica on the trainer's GPUs,
    how many fit, what a lend costs, and the trainer's lock (held while lent, so the
    trainer cannot compute on GPUs the engine holds)."""

    make: Callable[[int, int, float], Any]  # (index, version, memory_fraction) -> engine
    replicas: int  # trainer GPUs // the engine's TP
    cost: LendCost
    lock: Any  # the trainer's Slots(1)
