"""The kernel-priced trainer of a run (`sim.train_model = "kernels"`), from its config.

The framework (whose fitted constants apply) is the calibration's `[hardware]
trainer_framework` (megatron when it names none). Layout: the run's `trainer_ep`,
`trainer_pp` and `trainer_vpp`, TP 1; FSDP-style sharding for fsdp and deepspeed
(ZeRO-3), Megatron's DDP with its distributed optimizer for megatron; full activation
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
from harness.sim.trainer.step import KernelTrainModel, Passes

SHARDED = ("fsdp", "deepspeed")


def framework_of(calibration: dict[str, Any]) -> str:
    return str(calibration.get("hardware", {}).get("trainer_framework", "megatron"))


def from_config(sim: Any, calibration: dict[str, Any], hw: Hardware, model: Model,
                gpu: str, gpus: int) -> KernelTrainModel:
    """The run's trainer; a GPU the database cannot price is one line (TrainerKernelError)."""
    framework = framework_of(calibration)
    layout = Layout(gpus, pp=int(getattr(sim, "trainer_pp", 1)),
                    vpp=int(getattr(sim, "trainer_vpp", 1)), ep=int(sim.trainer_ep),
                    fsdp=framework in SHARDED, recompute=framework in SHARDED)
    problem = layout.check()
    if problem:
        raise db.TrainerKernelError(f"sim.train_model=kernels: {problem}")
    db.tables(gpu)  # no kernels for this GPU: said now, before the run starts
    return KernelTrainModel(gpu, hw, model, layout, framework,
                            precision=str(getattr(sim, "trainer_precision", "bf16")),
                            passes=Passes(forwards=int(sim.log_prob_forwards),
                                          recompute=layout.recompute),
                            micro_tokens=int(sim.micro_batch_tokens))


def pool_micro_tokens(train: KernelTrainModel) -> int:
    """Tokens of one pool-wide micro-batch: one micro-batch per data-parallel replica."""
    return train.micro_tokens * train.layout.dp
