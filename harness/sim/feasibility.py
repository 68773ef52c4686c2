"""Whether a simulated cluster can hold its model at all, with the cause in numbers.

Why before any work: the simulator prices time, not memory, so a 32B model
"trained" on one 24 GB card runs and reports a number. `run`, `sweep` and
`plan` refuse such a cluster with the same checks, each naming the real cause:

- engine: each GPU of a replica holds 1/TP of the weights (every expert of a MoE, at
  the rollout precision's bytes) within its
  `mem_fraction` of memory, and TP divides the attention and KV heads (a
  replica splits them evenly across its GPUs);
- trainer: bf16 weights and gradients with fp32 master weights and two Adam
  moments, 16 bytes per parameter, fully sharded across the trainer GPUs (ZeRO-3
  / FSDP), within 80% of each GPU's memory, the rest left for activations. A
  colocated trainer shares the engine's GPUs, which it has to itself while
  training (the engine's memory is released), so the same bound applies there.
  A MoE's routed experts are held as Megatron-core holds them under expert
  parallelism (`sim.trainer_ep`): each GPU keeps the bf16 weights and gradients of
  its EP rank's experts, 1/EP of them, and the optimizer's 12 bytes of each
  expert parameter are sharded over the expert-data-parallel GPUs, so over all
  of them. EP = the trainer's GPUs is the fully sharded bound again.
"""

from __future__ import annotations

from harness.sim.engine_spec import EngineSpec
from harness.sim.presets import Hardware, Model

TRAIN_BYTES_PER_PARAM = 16  # bf16 weights and grads, fp32 master weights and Adam moments
TRAIN_MEM_SHARE = 0.8  # of each trainer GPU's memory; the rest for activations
WEIGHT_GRAD_BYTES = 4  # bf16 weights and gradients: what an EP rank holds of its experts


def engine_problem(spec: EngineSpec, mem_fraction: float) -> str | None:
    """Why one engine replica cannot serve its model (None: it can). The weights are all
    held, every expert included, at the rollout precision's bytes; with attention DP the
    non-expert weights whole on every rank (`EngineSpec.weight_bytes_per_gpu`)."""
    model, name, tp = spec.model, spec.model_name, spec.tp
    attn = spec.attention_tp  # the GPUs one attention-DP rank splits the heads over
    if not splits(model, attn):
        count, what = ((model.heads, "attention heads") if model.heads % attn
                       else (model.kv_heads, "KV heads"))
        fits = [t for t in (1, 2, 4, 8) if splits(model, t)]
        where = f"TP {tp} / attention DP {spec.attention_dp}" if attn != tp else f"TP {tp}"
        return (f"{where} does not divide {name}'s {count} {what} (a replica splits them "
                f"evenly; TP can be {', '.join(map(str, fits))})")
    total = model.weight_bytes(spec.bytes_per_weight)
    need = spec.weight_bytes_per_gpu() / 1e9
    room = spec.hw.memory_gb * mem_fraction
    if need > room:
        least = next((t for t in (2, 4, 8, 16) if total / t / 1e9 <= room
                      and splits(model, t)), None)
        fix = (f"TP {least} or more, or a larger sim.mem_fraction" if least
               else "a larger sim.mem_fraction or a GPU with more memory")
        if spec.attention_dp != 1:  # every rank holds the non-expert weights whole
            fix = f"a smaller sim.rollout_attention_dp, {fix}"
        where = f"TP {tp}" + (f", attention DP {spec.attention_dp}" if attn != tp else "")
        return (f"{name}'s {spec.precision} weights take {need:.1f} GB per GPU at {where}; "
                f"an {spec.gpu_name} offers {room:.1f} GB ({spec.hw.memory_gb:g} GB x "
                f"mem_fraction {mem_fraction:g}): use {fix}")
    return None


def splits(model: Model, tp: int) -> bool:
    """TP divides the attention heads, and the KV heads divide into TP or TP into them
    (past one KV head a GPU, vLLM and SGLang replicate each KV head on TP / kv_heads GPUs:
    vllm-project/vllm, model_executor/layers/linear.py, QKVParallelLinear)."""
    return model.heads % tp == 0 and (model.kv_heads % tp == 0 or tp % model.kv_heads == 0)


def trainer_ep_problem(model: Model, name: str, ep: int) -> str | None:
    """Why a trainer cannot split `model`'s experts over `ep` ranks (None: it can).
    Megatron-core asserts that EP divides the experts
    (NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553:
    megatron/core/transformer/moe/moe_layer.py:186-187)."""
    if ep == 1:
        return None
    if not model.is_moe:
        return f"{name} has no experts to split (EP {ep}); use 1"
    if model.experts % ep:
        return f"EP {ep} does not divide {name}'s {model.experts} experts"
    return None


def trainer_gb_per_gpu(model: Model, gpus: int, ep: int = 1) -> float:
    """GB of training state on each of `gpus` trainer GPUs at expert parallelism `ep`:
    every dense parameter's 16 bytes sharded over all GPUs; of a routed expert's, the
    bf16 weight and gradient (4 bytes) on its EP rank's GPUs, replicated over the
    GPUs / EP expert-data-parallel ranks, and the fp32 master weight and two Adam moments
    (12 bytes) sharded over those ranks. Megatron-core reduces expert gradients and
    builds the expert optimizer over the intra-expert-data-parallel group
    (NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553:
    megatron/core/distributed/distributed_data_parallel.py:285-286,
    megatron/core/optimizer/__init__.py:1243)."""
    experts = model.expert_params_b
    dense = model.params_b - experts
    optim = TRAIN_BYTES_PER_PARAM - WEIGHT_GRAD_BYTES
    return (TRAIN_BYTES_PER_PARAM * dense / gpus + WEIGHT_GRAD_BYTES * experts / ep
            + optim * experts / gpus)


def trainer_problem(model: Model, name: str, gpu: Hardware, gpu_name: str, gpus: int,
                    ep: int = 1) -> str | None:
    """Why `gpus` trainer GPUs at expert parallelism `ep` cannot hold `model`'s training
    state (None: they can)."""
    need = trainer_gb_per_gpu(model, gpus, ep)
    room = TRAIN_MEM_SHARE * gpu.memory_gb
    if need <= room:
        return None
    offers = f"each offers {room:.1f} GB ({TRAIN_MEM_SHARE:.0%} of {gpu.memory_gb:g} GB)"
    if model.is_moe:
        fits = [e for e in range(ep + 1, gpus + 1) if gpus % e == 0 and model.experts % e == 0
                and trainer_gb_per_gpu(model, gpus, e) <= room]
        fix = f"sim.trainer_ep={fits[0]}" if fits else "more GPUs or a larger sim.trainer_ep"
        return (f"training {name} ({model.params_b:g}B parameters, {model.expert_params_b:g}B "
                f"of them experts split over EP {ep}) needs {need:.1f} GB on each of {gpus} "
                f"{gpu_name}; {offers}: use {fix}")
    least = -(-TRAIN_BYTES_PER_PARAM * model.params_b // room)
    return (f"training {name} ({model.params_b:g}B parameters x {TRAIN_BYTES_PER_PARAM} "
            f"bytes, sharded) needs {need:.1f} GB on each of {gpus} {gpu_name}; {offers}: "
            f"use {least:.0f} or more")
