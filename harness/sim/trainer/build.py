"""The kernel-priced trainer of a run (`sim.train_model = "kernels"`, the default), from
its config, and when a run takes the MFU line instead (`mfu_line_reason`).

The framework (whose fitted constants apply) is the calibration's `[hardware]
trainer_framework` (megatron when it names none). Layout: the run's `trainer_ep`,
`trainer_tp`, `trainer_pp`, `trainer_vpp` and `trainer_cp`; FSDP-style sharding for fsdp
and deepspeed (ZeRO-3), Megatron's DDP with its distributed optimizer for megatron; full activation
recompute for fsdp and deepspeed (verl's FSDP workers' `enable_gradient_checkpointing`, on
in its example scripts), none for megatron (Megatron-LM's default). `micro_batch_tokens`
is what one data-parallel replica packs into a micro-batch (verl's
`ppo_max_token_len_per_gpu`, Megatron's micro-batch), so the pool's micro-batch is that
times the replicas (`pool_micro_tokens`). `trainer_precision` fp8 prices every product,
forward and backward, from the database's per-tensor FP8 GEMM table (a forward kernel's
rate for dgrad and wgrad too: the database times no backward GEMM); attention, the
experts (the moe table's bf16 rows) and the collectives stay BF16.
"""

from __future__ import annotations

from typing import Any

from harness.sim.presets import Hardware, Model
from harness.sim.trainer import db
from harness.sim.trainer.layout import Layout
from harness.sim.trainer.speed import Speed, framework_of
from harness.sim.trainer.speed import resolve as resolve_speed
from harness.sim.trainer.step import KernelTrainModel, Passes
from harness.sim.trainer_mfu import trainer_gpu

SHARDED = ("fsdp", "deepspeed")


def mfu_line_reason(sim: Any, calibration: dict[str, Any]) -> str | None:
    """Why this run's trainer takes the MFU line instead of the kernel trainer, or None
    when the kernel trainer prices it: `sim.train_model=mfu`, a set `sim.train_mfu` (a
    user's override), a calibration with a measured `[train]` table (a live machine's),
    or a trainer GPU the database has no kernels for (the one case said to the user)."""
    if sim.train_model != "kernels":
        return "sim.train_model=mfu"
    if sim.train_mfu is not None:
        return "sim.train_mfu is set"
    if "train" in calibration:
        return "the calibration's measured trainer"
    try:
        db.tables(trainer_gpu(sim))
    except db.TrainerKernelError:
        return (f"the kernel database has no kernels for {trainer_gpu(sim)}: the MFU line "
                f"prices its trainer")
    return None


def checked_layout(sim: Any, calibration: dict[str, Any], model: Model, gpu: str,
                   gpus: int) -> Layout:
    """The trainer's layout, or TrainerKernelError (one line) for a layout that cannot be,
    a GPU the database has no kernels for, or a MoE whose experts it cannot price (not
    numpy's error at the first train step). A run asks before it says any note, so that
    a refused run says its error line alone; the lookups are cached for the build."""
    framework = framework_of(calibration)
    layout = Layout(gpus, tp=int(sim.trainer_tp), pp=int(sim.trainer_pp),
                    vpp=int(sim.trainer_vpp), ep=int(sim.trainer_ep), cp=int(sim.trainer_cp),
                    fsdp=framework in SHARDED, recompute=framework in SHARDED)
    problem = layout.check()
    if problem:
        raise db.TrainerKernelError(f"sim.train_model=kernels: {problem}")
    db.tables(gpu)
    if model.is_moe:
        db.moe_forward_s(gpu, 1, model.hidden, model.expert_intermediate // layout.tp,
                         model.experts, model.experts_per_token, layout.ep)
    return layout


def from_config(sim: Any, calibration: dict[str, Any], hw: Hardware, model: Model,
                gpu: str, gpus: int, speed: Speed | None = None) -> KernelTrainModel:
    """The run's trainer; a GPU the database cannot price is one line (TrainerKernelError,
    `checked_layout`). `speed`: the resolved scale and per-step fixed cost (`speed.resolve`
    of the run's config and calibration when None; a probe's knobs hand their own)."""
    framework = framework_of(calibration)
    speed = speed or resolve_speed(sim, calibration)
    layout = checked_layout(sim, calibration, model, gpu, gpus)
    return KernelTrainModel(gpu, hw, model, layout, framework,
                            precision=str(sim.trainer_precision),
                            passes=Passes(forwards=int(sim.log_prob_forwards),
                                          recompute=layout.recompute),
                            micro_tokens=int(sim.micro_batch_tokens),
                            scale=speed.scale, step_fixed_s=speed.step_fixed_s)


def pool_micro_tokens(train: KernelTrainModel) -> int:
    """Tokens of one pool-wide micro-batch: one micro-batch per data-parallel replica."""
    return train.micro_tokens * train.layout.dp
