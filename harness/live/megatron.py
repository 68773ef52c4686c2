"""A Megatron-core trainer backend (GPU only; not exercised on this machine).

Three pieces of plain logic, unit-tested here, and a learner that uses them:

- `Layout`: the parallel-layout arithmetic. A world of W GPUs splits into
  tensor (TP), pipeline (PP) and context (CP) parallel groups, the rest is
  data parallel: DP = W / (TP * PP * CP). A global batch of B sequences runs as
  B / (DP * micro) micro-batches per step on each data-parallel rank.
- `to_hf`: Megatron's parameter names and fused tensors (QKV packed per query
  group, gate and up packed in fc1) turned into the Hugging Face Qwen3 names
  and shapes the engine loads; `from_hf` is its inverse, for loading.
- `plan_buckets`: the order in which weights travel to the engine, in buckets
  of at most a given size, so a weight update never holds the whole model in
  flight at once.

`MegatronLearner` is a `GRPOLearner` (backward, apply, save, export) over a
`megatron.core` GPTModel, on one tensor/pipeline-parallel rank group started
by torchrun. It needs CUDA and the `megatron` extra, and says so when missing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.live.trainer import GRPOLearner


@dataclass(frozen=True)
class Layout:
    world: int
    tp: int = 1
    pp: int = 1
    cp: int = 1

    def __post_init__(self) -> None:
        for name in ("world", "tp", "pp", "cp"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.world % (self.tp * self.pp * self.cp):
            raise ValueError(f"world {self.world} is not divisible by tp*pp*cp = "
                             f"{self.tp * self.pp * self.cp}")

    @property
    def dp(self) -> int:
        return self.world // (self.tp * self.pp * self.cp)

    def check_model(self, heads: int, kv_heads: int, layers: int) -> None:
        """TP splits attention heads (and KV heads), PP splits layers."""
        if heads % self.tp or kv_heads % self.tp:
            raise ValueError(f"tp {self.tp} must divide heads {heads} and kv heads {kv_heads}")
        if layers % self.pp:
            raise ValueError(f"pp {self.pp} must divide layers {layers}")

    def micro_batches(self, global_batch: int, micro: int) -> int:
        """Micro-batches each data-parallel rank runs per optimizer step."""
        if global_batch % (self.dp * micro):
            raise ValueError(f"global batch {global_batch} is not divisible by "
                             f"dp*micro = {self.dp * micro}")
        return global_batch // (self.dp * micro)

    def coords(self, rank: int) -> dict[str, int]:
        """A rank's place, TP fastest, then CP, then DP, then PP (Megatron's
        default order), so a TP group is contiguous GPUs inside one node."""
        if not 0 <= rank < self.world:
            raise ValueError(f"rank {rank} outside world {self.world}")
        tp, rest = rank % self.tp, rank // self.tp
        cp, rest = rest % self.cp, rest // self.cp
        dp, pp = rest % self.dp, rest // self.dp
        return {"tp": tp, "cp": cp, "dp": dp, "pp": pp}


@dataclass(frozen=True)
class Heads:
    heads: int
    kv_heads: int
    head_dim: int


_LAYER = re.compile(r"decoder\.layers\.(\d+)\.(.+)")
_SIMPLE = {
    "embedding.word_embeddings.weight": "model.embed_tokens.weight",
    "decoder.final_layernorm.weight": "model.norm.weight",
    "output_layer.weight": "lm_head.weight",
}
_IN_LAYER = {
    "self_attention.linear_qkv.layer_norm_weight": "input_layernorm.weight",
    "self_attention.q_layernorm.weight": "self_attn.q_norm.weight",
    "self_attention.k_layernorm.weight": "self_attn.k_norm.weight",
    "self_attention.linear_proj.weight": "self_attn.o_proj.weight",
    "mlp.linear_fc1.layer_norm_weight": "post_attention_layernorm.weight",
    "mlp.linear_fc2.weight": "mlp.down_proj.weight",
}


def split_qkv(w: np.ndarray, h: Heads) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Megatron packs QKV per query group: [q of the group's heads, k, v]."""
    per = h.heads // h.kv_heads
    grouped = w.reshape(h.kv_heads, (per + 2) * h.head_dim, -1)
    q = grouped[:, : per * h.head_dim].reshape(h.heads * h.head_dim, -1)
    k = grouped[:, per * h.head_dim : (per + 1) * h.head_dim].reshape(h.kv_heads * h.head_dim, -1)
    v = grouped[:, (per + 1) * h.head_dim :].reshape(h.kv_heads * h.head_dim, -1)
    return q, k, v


def fuse_qkv(q: np.ndarray, k: np.ndarray, v: np.ndarray, h: Heads) -> np.ndarray:
    per = h.heads // h.kv_heads
    cols = q.shape[-1]
    parts = [q.reshape(h.kv_heads, per * h.head_dim, cols),
             k.reshape(h.kv_heads, h.head_dim, cols), v.reshape(h.kv_heads, h.head_dim, cols)]
    return np.concatenate(parts, axis=1).reshape(-1, cols)


def to_hf(name: str, w: np.ndarray, h: Heads) -> list[tuple[str, np.ndarray]]:
    """One Megatron parameter as the Hugging Face parameters it holds."""
    if name in _SIMPLE:
        return [(_SIMPLE[name], w)]
    m = _LAYER.fullmatch(name)
    if m is None:
        raise KeyError(f"no Hugging Face name for {name!r}")
    i, rest = m.groups()
    pre = f"model.layers.{i}."
    if rest in _IN_LAYER:
        return [(pre + _IN_LAYER[rest], w)]
    if rest == "self_attention.linear_qkv.weight":
        q, k, v = split_qkv(w, h)
        return [(pre + "self_attn.q_proj.weight", q), (pre + "self_attn.k_proj.weight", k),
                (pre + "self_attn.v_proj.weight", v)]
    if rest == "mlp.linear_fc1.weight":
        gate, up = np.split(w, 2, axis=0)
        return [(pre + "mlp.gate_proj.weight", gate), (pre + "mlp.up_proj.weight", up)]
    raise KeyError(f"no Hugging Face name for {name!r}")


def from_hf(hf: dict[str, np.ndarray], layers: int, h: Heads) -> dict[str, np.ndarray]:
    """A Hugging Face Qwen3 state dict under Megatron's names (the inverse of `to_hf`)."""
    out = {mega: hf[name] for mega, name in _SIMPLE.items() if name in hf}
    for i in range(layers):
        pre, mpre = f"model.layers.{i}.", f"decoder.layers.{i}."
        for mega, name in _IN_LAYER.items():
            out[mpre + mega] = hf[pre + name]
        out[mpre + "self_attention.linear_qkv.weight"] = fuse_qkv(
            hf[pre + "self_attn.q_proj.weight"], hf[pre + "self_attn.k_proj.weight"],
            hf[pre + "self_attn.v_proj.weight"], h)
        out[mpre + "mlp.linear_fc1.weight"] = np.concatenate(
            [hf[pre + "mlp.gate_proj.weight"], hf[pre + "mlp.up_proj.weight"]], axis=0)
    return out


def plan_buckets(sizes: list[tuple[str, int]], bucket_bytes: int) -> list[list[str]]:
    """Consecutive parameters in buckets of at most `bucket_bytes`; a parameter
    larger than that travels alone. Order is kept: the engine loads in order."""
    if bucket_bytes <= 0:
        raise ValueError("bucket_bytes must be positive")
    buckets: list[list[str]] = []
    used = 0
    for name, size in sizes:
        if not buckets or used + size > bucket_bytes:
            buckets.append([])
            used = 0
        buckets[-1].append(name)
        used += size
    return buckets


class MegatronLearner(GRPOLearner):
    """GRPO on a Megatron-core GPTModel (GPU only): the torch learner's loss,
    statistics and checkpointing, over Megatron's model and names."""

    @classmethod
    def from_config(cls, cfg: Any) -> MegatronLearner:
        import importlib.util

        if importlib.util.find_spec("megatron") is None:
            raise RuntimeError("live.trainer = megatron needs the `megatron` extra "
                               "(pip install 'rolloutbench[megatron]') on a GPU machine")
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("live.trainer = megatron needs CUDA GPUs; this machine has none")
        return cls(cfg)

    def __init__(self, cfg: Any) -> None:  # pragma: no cover - GPU only
        import torch
        from megatron.core import parallel_state
        from megatron.core.models.gpt import GPTModel
        from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
        from megatron.core.transformer import TransformerConfig
        from transformers import AutoConfig

        live = cfg.live
        hf = AutoConfig.from_pretrained(live.model_dir)
        self.heads = Heads(hf.num_attention_heads, hf.num_key_value_heads,
                           getattr(hf, "head_dim", hf.hidden_size // hf.num_attention_heads))
        layout = Layout(torch.distributed.get_world_size(), live.megatron_tp, live.megatron_pp)
        layout.check_model(self.heads.heads, self.heads.kv_heads, hf.num_hidden_layers)
        parallel_state.initialize_model_parallel(layout.tp, layout.pp)
        tcfg = TransformerConfig(
            num_layers=hf.num_hidden_layers, hidden_size=hf.hidden_size,
            num_attention_heads=self.heads.heads, num_query_groups=self.heads.kv_heads,
            kv_channels=self.heads.head_dim, ffn_hidden_size=hf.intermediate_size,
            normalization="RMSNorm", gated_linear_unit=True, qk_layernorm=True,
            # Qwen3's MLP is SwiGLU and its norms use the config's epsilon; Megatron's
            # defaults (GeLU, 1e-5) would compute another model from the same weights.
            activation_func=torch.nn.functional.silu,
            layernorm_epsilon=getattr(hf, "rms_norm_eps", 1e-6),
            add_bias_linear=False, bf16=True, params_dtype=torch.bfloat16)
        model = GPTModel(tcfg, get_gpt_layer_local_spec(qk_layernorm=True),
                         vocab_size=hf.vocab_size, max_sequence_length=live.max_model_len,
                         position_embedding_type="rope",
                         rotary_base=int(getattr(hf, "rope_theta", 10000)),
                         share_embeddings_and_output_weights=False)
        self._load_hf(model, live.model_dir, hf.num_hidden_layers)
        self._init(model, live.model_dir, live.lr, cfg.clamp)
        self.bucket_bytes = live.megatron_bucket_mb << 20

    def _load_hf(self, model: Any, model_dir: str, layers: int) -> None:  # pragma: no cover
        """Start from the engine's weights. Whole tensors: TP = PP = 1 only (a
        sharded load would split each tensor by `Layout.coords`; left out)."""
        import torch
        from transformers import AutoModelForCausalLM

        hf = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        state = {k: v.numpy() for k, v in hf.state_dict().items()}
        mega = from_hf(state, layers, self.heads)
        model.load_state_dict({k: torch.from_numpy(v) for k, v in mega.items()}, strict=False)
        model.cuda()

    def _logits(self, x: Any) -> Any:  # pragma: no cover - GPU only
        x = x.cuda()
        positions = self._torch.arange(x.shape[1], device=x.device)[None]
        return self.model(x, positions, attention_mask=None)[0]

    def _state(self) -> dict[str, Any]:  # pragma: no cover - GPU only
        """The weights under Hugging Face names, gathered bucket by bucket."""
        import torch

        params = dict(self.model.state_dict())
        sizes = [(n, p.numel() * p.element_size()) for n, p in params.items()
                 if not n.endswith("_extra_state")]
        out: dict[str, Any] = {}
        for bucket in plan_buckets(sizes, self.bucket_bytes):
            for name in bucket:
                w = params[name].detach().float().cpu().numpy()
                for hf_name, part in to_hf(name, w, self.heads):
                    out[hf_name] = torch.from_numpy(np.ascontiguousarray(part)).bfloat16()
        return out
