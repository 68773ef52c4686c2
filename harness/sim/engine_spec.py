"""What engine a run's rollout is, resolved once: model, GPU, framework and layout.

Why one place: a run's engine used to be worked out by walking between the presets, the
kernel source, the model-config reader and the calibration, each call naming the model,
GPU, framework and TP again. Mixture-of-experts models, FP8 and expert parallelism add
settings that every one of those walks would need; here names and settings become one
`EngineSpec`, which `run`, `steps`, `plan` and the feasibility check all read.

Layout (one replica of `tp` GPUs): the attention and dense layers split over TP; a MoE's
experts split over `ep` groups and each expert over the `tp / ep` GPUs of its group (the
database's moe_tp x moe_ep = tp; attention data parallelism is not modelled). Precision:
`fp8` stores weights in one byte and runs the matmuls in FP8, block-scaled where the
checkpoint's config says so (`weight_block_size`, DeepSeek-V3's 128 x 128); `kv_dtype`
is the KV cache's element type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.config import ConfigError
from harness.sim.presets import Hardware, Model, load_hardware, load_model

BYTES = {"bf16": 2, "fp8": 1}  # per weight or cached element


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

    @property
    def bytes_per_weight(self) -> int:
        """Bytes per weight at the rollout precision."""
        return BYTES[self.precision]

    @property
    def bytes_per_kv(self) -> int:
        """Bytes per cached element."""
        return BYTES[self.kv_dtype]

    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes one token takes across the replica's GPUs. Heads split over TP;
        past one KV head a GPU each head is replicated on TP / kv_heads GPUs; a latent
        cache (multi-head latent attention) is held whole on every GPU of the replica."""
        one = self.model.kv_bytes_per_token(self.bytes_per_kv)
        if self.model.kv_width:
            return one * self.tp
        return one * max(1.0, self.tp / self.model.kv_heads)

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
        return out

    def estimator_kwargs(self) -> dict[str, Any]:
        """aiconfigurator-core's compile options for this layout. A dense BF16 replica
        passes none (the estimator reads BF16 from its config); any other states every
        format, so an FP8 checkpoint's config does not override the run's precision, and
        attention runs in the KV cache's type (left to itself, the estimator runs a
        block-FP8 model's attention in FP8 and has no SGLang table for that)."""
        out: dict[str, Any] = {}
        if self.precision == "fp8":
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
        return out

    def describe(self) -> str:
        """`Qwen3-30B-A3B on 8 x h100-sxm (TP 8, EP 8, fp8, KV bf16), sglang`."""
        parts = [f"TP {self.tp}"] + ([f"EP {self.ep}"] if self.ep != 1 else [])
        parts += [self.precision, f"KV {self.kv_dtype}"]
        return (f"{self.model.name} on {self.tp} x {self.gpu_name} ({', '.join(parts)}), "
                f"{self.backend}")


def _block_scaled(config_path: str) -> bool:
    import json

    from harness.sim.model_config import config_file

    raw = json.loads(config_file(config_path).read_text("utf-8"))
    return bool((raw.get("quantization_config") or {}).get("weight_block_size"))


def resolve_engine(model: str, gpu: str, backend: str, tp: int, ep: int = 1,
                   precision: str = "bf16", kv_dtype: str = "bf16") -> EngineSpec:
    """The engine these names and settings describe; a setting the model cannot take is
    one line (ConfigError) naming it."""
    m = load_model(model)
    if ep < 1 or tp % ep:
        raise ConfigError(f"sim.rollout_ep: EP {ep} must divide TP {tp}")
    if ep != 1 and not m.is_moe:
        raise ConfigError(f"sim.rollout_ep: {m.name} has no experts to split (EP {ep}); "
                          f"use 1")
    if m.is_moe and m.experts % ep:
        raise ConfigError(f"sim.rollout_ep: EP {ep} does not divide {m.name}'s {m.experts} "
                          f"experts")
    if precision not in BYTES or kv_dtype not in BYTES:
        raise ConfigError(f"sim.rollout_precision / rollout_kv_dtype: must be "
                          f"{' or '.join(BYTES)}, got {precision!r} / {kv_dtype!r}")
    return EngineSpec(model, m, gpu, load_hardware(gpu), backend, tp, ep, precision, kv_dtype)


def engine_of(sim: Any, tp: int | None = None) -> EngineSpec:
    """The engine replica of a run's `sim` settings (at another TP where given)."""
    return resolve_engine(sim.model, sim.rollout_gpu, sim.engine_backend, tp or sim.rollout_tp,
                          sim.rollout_ep, sim.rollout_precision, sim.rollout_kv_dtype)
