"""What engine a run's rollout is, resolved once: model, GPU, framework and layout.

Why one place: a run's engine used to be worked out by walking between the presets, the
kernel source, the model-config reader and the calibration, each call naming the model,
GPU, framework and TP again. Mixture-of-experts models, FP8 and expert parallelism add
settings that every one of those walks would need; here names and settings become one
`EngineSpec`, which `run`, `steps`, `plan` and the feasibility check all read.

Layout (one replica of `tp` GPUs): the attention and dense layers split over TP; a MoE's
experts split over `ep` groups and each expert over the `tp / ep` GPUs of its group (the
database's moe_tp x moe_ep = tp). Attention data parallelism (`attention_dp` ranks, MoE
models only) splits the replica into DP ranks of `tp / attention_dp` GPUs each, as SGLang's
`--tp N --dp D --enable-dp-attention` does (attn_tp_size = tp_size // dp_size:
sgl-project/sglang@2aa2e2d0:python/sglang/srt/layers/dp_attention.py:208-215) and vLLM's
DP x TP with expert parallelism (vllm-project/vllm@624b7aff:
docs/serving/data_parallel_deployment.md:7-17): each rank holds the attention and other
non-expert weights whole at its attention TP, runs attention for its own sequences and keeps
their KV cache, while the experts span every GPU of the replica (moe_tp x moe_ep = tp) and
see the tokens of all ranks. A dense model's DP ranks are independent replicas, which is
`sim.rollout_engines`, so attention DP is refused there. Precision:
`fp8` stores weights in one byte and runs the matmuls in FP8, block-scaled where the
checkpoint's config says so (`weight_block_size`, DeepSeek-V3's 128 x 128); `fp4` is NVFP4,
every GEMM and expert in 4 bits with one FP8 scale per 16 weights (9/16 of a byte, as the
database counts it: ai-dynamo/aiconfigurator@095f58a5:aic-core/src/aiconfigurator_core/sdk/
common.py:1231), priced by the measured kernels on GPUs whose tables hold NVFP4 (Blackwell);
`kv_dtype` is the KV cache's element type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.config import ConfigError
from harness.sim import speculative
from harness.sim.presets import Hardware, Model, load_hardware, load_model

BYTES = {"bf16": 2, "fp8": 1}  # per weight or cached element
WEIGHT_BYTES = {**BYTES, "fp4": 9 / 16}  # per weight: NVFP4 with its FP8 scales


@dataclass(frozen=True)
class EngineSpec:
    """One engine replica, names resolved: what every cost model and check of it needs."""

    model_name: str  # as the user gave it: a preset, or the path of a config.json
    model: Model
    gpu_name: str
    hw: Hardware
    backend: str
    tp: int
    ep: int = 1
    precision: str = "bf16"
    kv_dtype: str = "bf16"
    attention_dp: int = 1

    @property
    def attention_tp(self) -> int:
        """GPUs one attention-DP rank runs attention on (the whole replica without DP)."""
        return self.tp // self.attention_dp

    @property
    def bytes_per_weight(self) -> float:
        """Bytes per weight at the rollout precision."""
        return WEIGHT_BYTES[self.precision]

    @property
    def bytes_per_kv(self) -> int:
        """Bytes per cached element."""
        return BYTES[self.kv_dtype]

    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes one token takes across the replica's GPUs. Heads split over TP;
        past one KV head a GPU each head is replicated on TP / kv_heads GPUs; a latent
        cache (multi-head latent attention) is held whole on every GPU of the replica."""
        one = self.model.kv_bytes_per_token(self.bytes_per_kv)
        tp = self.attention_tp  # a token lives on one attention-DP rank
        if self.model.kv_width:
            return one * tp
        return one * max(1.0, tp / self.model.kv_heads)

    def weight_bytes_per_gpu(self) -> float:
        """Weight bytes each GPU of the replica holds: the experts split over all `tp` GPUs,
        the rest over the attention TP (replicated on every attention-DP rank; the same
        split as ai-dynamo/aiconfigurator@095f58a5:aic-core/src/aiconfigurator_core/sdk/
        memory.py:766,795-798, where attention DP does not divide the non-expert weights)."""
        total = self.model.weight_bytes(self.bytes_per_weight)
        if self.attention_dp == 1:
            return total / self.tp
        experts = self.model.expert_params_b * 1e9 * self.bytes_per_weight
        return (total - experts) / self.attention_tp + experts / self.tp

    def layout(self) -> dict[str, Any]:
        """The settings beyond TP that differ from a dense BF16 replica (none for one: its
        kernel tables keep the identity they always had)."""
        out: dict[str, Any] = {}
        if self.ep != 1:
            out["ep"] = self.ep
        if self.precision != "bf16":
            out["precision"] = self.precision
        if self.kv_dtype != "bf16":
            out["kv_dtype"] = self.kv_dtype
        if self.attention_dp != 1:
            out["attention_dp"] = self.attention_dp
        return out

    def estimator_kwargs(self) -> dict[str, Any]:
        """aiconfigurator-core's compile options for this layout. A dense BF16 replica
        passes none (the estimator reads BF16 from its config); any other states every
        format, so an FP8 checkpoint's config does not override the run's precision, and
        attention runs in the KV cache's type (left to itself, the estimator runs a
        block-FP8 model's attention in FP8 and has no SGLang table for that)."""
        out: dict[str, Any] = {}
        if self.precision == "fp4":
            out["gemm_quant_mode"] = "nvfp4"
            if self.model.is_moe:
                out["moe_quant_mode"] = "nvfp4"
        elif self.precision == "fp8":
            quant = self.model.config and _block_scaled(self.model.config)
            out["gemm_quant_mode"] = "fp8_block" if quant else "fp8"
            if self.model.is_moe:
                out["moe_quant_mode"] = out["gemm_quant_mode"]
        elif self.model.is_moe:
            out["gemm_quant_mode"] = out["moe_quant_mode"] = "bfloat16"
        if out or self.kv_dtype != "bf16":  # attention runs in the KV cache's type
            kv = "fp8" if self.kv_dtype == "fp8" else "bfloat16"
            out["kvcache_quant_mode"] = out["fmha_quant_mode"] = kv
        if self.model.is_moe:
            out["moe_tp_size"], out["moe_ep_size"] = self.tp // self.ep, self.ep
        if self.attention_dp != 1:  # the estimator's tp_size is then the attention TP
            out["attention_dp_size"] = self.attention_dp
        return out

    def describe(self) -> str:
        """`Qwen3-30B-A3B on 8 x h100-sxm (TP 8, EP 8, fp8, KV bf16), sglang`."""
        parts = [f"TP {self.tp}"] + ([f"EP {self.ep}"] if self.ep != 1 else [])
        parts += [f"attention DP {self.attention_dp}"] if self.attention_dp != 1 else []
        parts += [self.precision, f"KV {self.kv_dtype}"]
        return (f"{self.model.name} on {self.tp} x {self.gpu_name} ({', '.join(parts)}), "
                f"{self.backend}")


def _block_scaled(config_path: str) -> bool:
    import json

    from harness.sim.model_config import config_file

    raw = json.loads(config_file(config_path).read_text("utf-8"))
    return bool((raw.get("quantization_config") or {}).get("weight_block_size"))


def resolve_engine(model: str, gpu: str, backend: str, tp: int, ep: int = 1,
                   precision: str = "bf16", kv_dtype: str = "bf16",
                   attention_dp: int = 1) -> EngineSpec:
    """The engine these names and settings describe; a setting the model cannot take is
    one line (ConfigError) naming it."""
    m = load_model(model)
    if attention_dp < 1 or tp % attention_dp:
        raise ConfigError(f"sim.rollout_attention_dp: {attention_dp} must divide TP {tp} "
                          f"(each rank runs attention on TP / DP GPUs)")
    if attention_dp != 1 and not m.is_moe:
        raise ConfigError(f"sim.rollout_attention_dp: {m.name} is dense: its DP ranks would be "
                          f"independent replicas; use sim.rollout_engines")
    if ep < 1 or tp % ep:
        raise ConfigError(f"sim.rollout_ep: EP {ep} must divide TP {tp}")
    if ep != 1 and not m.is_moe:
        raise ConfigError(f"sim.rollout_ep: {m.name} has no experts to split (EP {ep}); "
                          f"use 1")
    if m.is_moe and m.experts % ep:
        raise ConfigError(f"sim.rollout_ep: EP {ep} does not divide {m.name}'s {m.experts} "
                          f"experts")
    if precision not in WEIGHT_BYTES or kv_dtype not in BYTES:
        raise ConfigError(f"sim.rollout_precision / rollout_kv_dtype: must be "
                          f"{' or '.join(WEIGHT_BYTES)} / {' or '.join(BYTES)}, got "
                          f"{precision!r} / {kv_dtype!r}")
    return EngineSpec(model, m, gpu, load_hardware(gpu), backend, tp, ep, precision, kv_dtype,
                      attention_dp)


def engine_of(sim: Any, tp: int | None = None) -> EngineSpec:
    """The engine replica of a run's `sim` settings (at another TP where given)."""
    return resolve_engine(sim.model, sim.rollout_gpu, sim.engine_backend, tp or sim.rollout_tp,
                          sim.rollout_ep, sim.rollout_precision, sim.rollout_kv_dtype,
                          sim.rollout_attention_dp)


ACTIVATION_RESERVE_BYTES = 1.5e9  # per GPU: CUDA graphs, activations, allocator slack


def kv_capacity_tokens(cfg: Any, tp: int | None = None) -> int:
    """KV-cache tokens an engine replica holds: what is left of the GPUs' static
    memory share after the (sharded) weights and a fixed activation reserve."""
    s = cfg.sim
    tp = tp or s.rollout_tp
    if s.kv_cache_tokens:  # a measured or configured cache (a live engine's twin)
        return s.kv_cache_tokens
    spec = engine_of(s, tp)  # with attention DP each rank caches its own sequences' tokens
    per_gpu = spec.hw.memory_gb * 1e9 * s.mem_fraction - spec.weight_bytes_per_gpu()
    per_gpu -= ACTIVATION_RESERVE_BYTES
    if getattr(s, "spec_drafter", "off") != "off":  # a drafter's weights and cache too
        weights, kv = speculative.memory(s, spec.model, spec.bytes_per_weight,
                                         spec.bytes_per_kv)
        per_token = spec.kv_bytes_per_token()  # the drafter's heads replicated alike
        per_token += kv * per_token / spec.model.kv_bytes_per_token(spec.bytes_per_kv)
        return int((per_gpu - weights / tp) * tp / per_token)
    return int(per_gpu * tp / spec.kv_bytes_per_token())
