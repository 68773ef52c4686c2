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
- a pipelined trainer (`sim.trainer_pp` > 1, Megatron's, `sim.trainer_vpp` virtual stages
  a GPU) holds its busiest stage: vpp x ceil(layers / (pp x vpp)) layers (the even split
  rounded up; Megatron's uneven layouts can only move layers, not drop them) and one
  embedding matrix, every stage layer counted as a MoE layer where the model has experts.
  Megatron keeps a stage's dense weights and gradients whole on each data-parallel rank
  (4 bytes), its distributed optimizer shards the 12 over those GPUs / PP ranks; experts
  as above within the stage.

A refusal names the option that is short: a larger `sim.trainer_ep` or `sim.trainer_pp`
where one fits on the same GPUs, else the GPU count.
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
        return f"{where} does not divide {name}'s {count} {what}; {', '.join(map(str, fits))} do"
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


def trainer_pp_problem(model: Model, name: str, pp: int, vpp: int) -> str | None:
    """Why a trainer cannot cut `model` into `pp` x `vpp` pipeline chunks (None: it can):
    each chunk needs a layer. Megatron's interleaved schedule needs PP > 1
    (NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553:
    megatron/training/arguments.py:1000-1004; the config refuses VPP > 1 at PP 1)."""
    if pp * vpp > model.layers:
        return (f"PP {pp} x VPP {vpp} = {pp * vpp} pipeline chunks exceed {name}'s "
                f"{model.layers} layers (each chunk needs one); PP x VPP can be at most "
                f"{model.layers}")
    return None


def stage_layers(layers: int, pp: int, vpp: int = 1) -> int:
    """Layers on the busiest GPU of a `pp`-stage pipeline with `vpp` virtual stages each:
    vpp chunks of ceil(layers / (pp x vpp))."""
    return vpp * -(-layers // (pp * vpp))


def moe_layers(model: Model) -> int:
    """Layers with routed experts: all of them over one layer's experts (DeepSeek-V3: 58
    of 61, its first three dense)."""
    if not model.is_moe:
        return 0
    per_layer = model.experts * 3 * model.hidden * model.expert_intermediate
    return round(model.expert_params_b * 1e9 / per_layer)


def _pipelined_gb(model: Model, gpus: int, ep: int, pp: int, vpp: int, tp: int = 1) -> float:
    """GB on the busiest GPU of a Megatron pipeline (module docstring)."""
    held = stage_layers(model.layers, pp, vpp)
    embed = model.vocab * model.hidden / 1e9  # one matrix: the input's or the head's
    matrices = 1 if model.tied_embeddings else 2
    experts = model.expert_params_b
    per_layer = (model.params_b - experts - matrices * embed) / model.layers
    dense = per_layer * held + embed
    moe = moe_layers(model)
    stage_experts = experts * min(held, moe) / moe if moe else 0.0
    optim = TRAIN_BYTES_PER_PARAM - WEIGHT_GRAD_BYTES
    return (WEIGHT_GRAD_BYTES * dense / tp + optim * dense * pp / gpus
            + WEIGHT_GRAD_BYTES * stage_experts / ep + optim * stage_experts * pp / gpus)


def trainer_gb_per_gpu(model: Model, gpus: int, ep: int = 1, pp: int = 1,
                       vpp: int = 1, tp: int = 1) -> float:
    """GB of training state on each of `gpus` trainer GPUs at expert parallelism `ep`:
    every dense parameter's 16 bytes sharded over all GPUs; of a routed expert's, the
    bf16 weight and gradient (4 bytes) on its EP rank's GPUs, replicated over the
    GPUs / EP expert-data-parallel ranks, and the fp32 master weight and two Adam moments
    (12 bytes) sharded over those ranks. Megatron-core reduces expert gradients and
    builds the expert optimizer over the intra-expert-data-parallel group
    (NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553:
    megatron/core/distributed/distributed_data_parallel.py:285-286,
    megatron/core/optimizer/__init__.py:1243). With `pp` > 1 the busiest stage of a
    Megatron pipeline (`_pipelined_gb`), whose whole dense weights and gradients TP
    splits (`tp`; fully sharded, TP changes nothing)."""
    if pp > 1:
        return _pipelined_gb(model, gpus, ep, pp, vpp, tp)
    experts = model.expert_params_b
    dense = model.params_b - experts
    optim = TRAIN_BYTES_PER_PARAM - WEIGHT_GRAD_BYTES
    return (TRAIN_BYTES_PER_PARAM * dense / gpus + WEIGHT_GRAD_BYTES * experts / ep
            + optim * experts / gpus)


def trainer_fixes(model: Model, gpu: Hardware, gpus: int, ep: int = 1, pp: int = 1,
                  vpp: int = 1, tp: int = 1) -> list[tuple[str, int]]:
    """The options that alone make the training state fit on the same GPUs, each at its
    least value: a larger EP (it divides the experts, EP x PP the GPUs), a larger PP (EP x
    PP divides the GPUs, PP x VPP at most the layers). Empty when neither does."""
    room = TRAIN_MEM_SHARE * gpu.memory_gb
    out: list[tuple[str, int]] = []
    if model.is_moe:
        eps = [e for e in range(ep + 1, gpus // pp + 1) if (gpus // pp) % e == 0
               and model.experts % e == 0
               and trainer_gb_per_gpu(model, gpus, e, pp, vpp, tp) <= room]
        out += [("sim.trainer_ep", eps[0])] if eps else []
    pps = [p for p in range(max(pp + 1, 2), gpus // ep + 1) if (gpus // ep) % p == 0
           and p * vpp <= model.layers and gpus % (p * tp) == 0
           and trainer_gb_per_gpu(model, gpus, ep, p, vpp, tp) <= room]
    return out + ([("sim.trainer_pp", pps[0])] if pps else [])


def trainer_problem(model: Model, name: str, gpu: Hardware, gpu_name: str, gpus: int,
                    ep: int = 1, pp: int = 1, vpp: int = 1, tp: int = 1) -> str | None:
    """Why `gpus` trainer GPUs at expert parallelism `ep`, `pp` pipeline stages of `vpp`
    virtual stages cannot hold `model`'s training state (None: they can). The way on is
    `trainer_fixes`' options, else more GPUs."""
    need = trainer_gb_per_gpu(model, gpus, ep, pp, vpp, tp)
    room = TRAIN_MEM_SHARE * gpu.memory_gb
    if need <= room:
        return None
    offers = f"each offers {room:.1f} GB ({TRAIN_MEM_SHARE:.0%} of {gpu.memory_gb:g} GB)"
    fixes = trainer_fixes(model, gpu, gpus, ep, pp, vpp, tp)
    layout = (f"EP {ep}" + (f" x PP {pp}" if pp > 1 else "") + (f" x VPP {vpp}" if vpp > 1
                                                                   else "")
              + (f" x TP {tp}" if tp > 1 and pp > 1 else ""))
    if model.is_moe or pp > 1:
        fix = (" or ".join(f"{k}={v}" for k, v in fixes) if fixes
               else "more GPUs" + (" or a larger sim.trainer_ep" if model.is_moe else ""))
        what = (f"{model.expert_params_b:g}B of them experts, at {layout}" if model.is_moe
                else f"at {layout}")
        return (f"training {name} ({model.params_b:g}B parameters, {what}) needs "
                f"{need:.1f} GB on each of {gpus} {gpu_name}; {offers}: use {fix}")
    least = -(-TRAIN_BYTES_PER_PARAM * model.params_b // room)
    return (f"training {name} ({model.params_b:g}B parameters x {TRAIN_BYTES_PER_PARAM} "
            f"bytes, sharded) needs {need:.1f} GB on each of {gpus} {gpu_name}; {offers}: "
            f"use {least:.0f} or more")
