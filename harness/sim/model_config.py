"""Models as Hugging Face `config.json` files, both ways.

A user's model is named by the path of its `config.json` (or of the folder that holds
one): it becomes a `Model` (the sizes the cost models need) without any download. And a
preset becomes a `config.json`, since the measured-kernel estimator reads a model only as
such a file: handing it a bare hub name would make it try to download one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.core.config import ConfigError

# Architectures whose parameter count the formulas below get right: dense SwiGLU decoders,
# and the mixture-of-experts ones aiconfigurator-core prices (SwiGLU experts, top-k routing;
# DeepSeek-V3's layout also covers Kimi K2, which ships as a DeepseekV3ForCausalLM).
_DENSE = {"Qwen3ForCausalLM": "qwen3", "Qwen2ForCausalLM": "qwen2",
          "LlamaForCausalLM": "llama", "MistralForCausalLM": "llama"}
_MOE = {"Qwen3MoeForCausalLM": "qwen3_moe", "MixtralForCausalLM": "mixtral",
        "DeepseekV3ForCausalLM": "deepseek_v3",
        # aiconfigurator-core's generic MoE: ai-dynamo/aiconfigurator@095f58a5:
        # aic-core/src/aiconfigurator_core/sdk/common.py:712
        "MiniMaxM2ForCausalLM": "minimax_m2"}
ARCHITECTURES = {**_DENSE, **_MOE}


class ModelConfigError(ConfigError):
    """A config.json that cannot be read or modelled; the message names the file."""


def is_config_path(name: str) -> bool:
    """A model named by a path (a config.json, or a folder with one), not a preset: a
    name with a '/' or ending in .json, or a folder here holding a config.json."""
    return name.endswith(".json") or "/" in name or (Path(name) / "config.json").is_file()


def config_file(name: str) -> Path:
    path = Path(name)
    return path / "config.json" if path.is_dir() else path


def load_config_fields(name: str) -> dict[str, Any]:
    """The fields of a `presets.Model` from a Hugging Face config.json: one line naming
    the file when it is missing, not JSON, not a dense decoder this project models, or
    lacks a field."""
    path = config_file(name)
    try:
        raw = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise ModelConfigError(f"sim.model: no such file {path}") from None
    except (OSError, ValueError) as err:
        raise ModelConfigError(f"sim.model: {path} is not a JSON file ({err})") from None
    if not isinstance(raw, dict):
        raise ModelConfigError(f"sim.model: {path} holds no JSON object")
    return config_fields(raw, path)


def config_fields(raw: dict[str, Any], path: Path = Path("config.json")) -> dict[str, Any]:
    """The fields of a `presets.Model` from a config.json's contents (`path` names it in
    messages)."""
    fields, total, active = _read(raw, path)
    fields["params_b"] = round(total / 1e9, 3)
    if fields.get("experts"):
        fields["active_params_b"] = round(active / 1e9, 3)
    return fields


def count_params(raw: dict[str, Any], path: Path = Path("config.json")) -> tuple[int, int]:
    """(every parameter, those one token passes through) of a config.json's model, exact
    (the same count `load_config_fields` rounds to billions)."""
    _, total, active = _read(raw, path)
    return total, active


def _read(raw: dict[str, Any], path: Path) -> tuple[dict[str, Any], int, int]:
    """A config's Model fields but the parameter counts, and those counts exact."""
    arch = (raw.get("architectures") or ["?"])[0]
    family = ARCHITECTURES.get(arch)
    if family is None:
        raise ModelConfigError(f"sim.model: {path}: architecture {arch!r} is not modelled "
                               f"(known: {', '.join(sorted(ARCHITECTURES))})")

    def size(key: str, default: int | None = None) -> int:
        value = raw.get(key)
        value = default if value is None else value
        if value is None:
            raise ModelConfigError(f"sim.model: {path}: missing field {key!r}")
        if type(value) is not int or value < 1:
            raise ModelConfigError(f"sim.model: {path}: {key} should be a positive integer, "
                                   f"got {value!r}")
        return value

    hidden, heads = size("hidden_size"), size("num_attention_heads")
    layers, inter, vocab = size("num_hidden_layers"), size("intermediate_size"), size("vocab_size")
    kv_heads = size("num_key_value_heads", heads)
    head_dim = size("head_dim", hidden // heads)
    if heads % kv_heads:
        raise ModelConfigError(f"sim.model: {path}: {heads} attention heads do not divide "
                               f"into {kv_heads} key-value heads")
    tied = bool(raw.get("tie_word_embeddings", False))
    fields: dict[str, Any] = dict(
        name=str(raw.get("_name_or_path") or path.parent.name or path.stem), layers=layers,
        hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim, intermediate=inter,
        vocab=vocab, tied_embeddings=tied, source=str(path), config=str(path))
    if arch in _MOE:
        extra, total, active = moe_fields(family, size, raw, path)
        return {**fields, **extra}, total, active
    total = param_count(family, layers, hidden, heads, kv_heads, head_dim, inter, vocab, tied)
    return fields, total, total


def moe_fields(family: str, size: Any, raw: dict[str, Any], path: Path
               ) -> tuple[dict[str, Any], int, int]:
    """A MoE config's routing fields, the routed experts' share and (DeepSeek-V3's latent
    attention) the cached width; with every parameter and those one token passes through."""
    hidden, layers = size("hidden_size"), size("num_hidden_layers")
    heads, vocab = size("num_attention_heads"), size("vocab_size")
    top_k = size("num_experts_per_tok")
    embed = vocab * hidden * (1 if raw.get("tie_word_embeddings") else 2) + hidden
    out: dict[str, Any] = {}
    if family == "deepseek_v3":
        experts, width = size("n_routed_experts"), size("moe_intermediate_size")
        shared = raw.get("n_shared_experts") or 0
        dense_layers = raw.get("first_k_dense_replace") or 0
        nope, rope, v = size("qk_nope_head_dim"), size("qk_rope_head_dim"), size("v_head_dim")
        latent, q_rank = size("kv_lora_rank"), raw.get("q_lora_rank") or 0
        q = (hidden * q_rank + q_rank + q_rank * heads * (nope + rope) if q_rank
             else hidden * heads * (nope + rope))
        attn = (q + hidden * (latent + rope) + latent + latent * heads * (nope + v)
                + heads * v * hidden + 2 * hidden)
        dense_mlp = 3 * hidden * size("intermediate_size")
        router = hidden * experts + experts  # and its score-correction bias
        out.update(head_dim=nope + rope, kv_width=latent + rope)
    else:  # qwen3_moe, mixtral, minimax_m2: every layer a MoE layer (Qwen3's
        # mlp_only_layers aside)
        experts = size("num_experts" if family == "qwen3_moe" else "num_local_experts")
        width = size("moe_intermediate_size" if family == "qwen3_moe" else "intermediate_size")
        shared, dense_mlp = 0, 3 * hidden * size("intermediate_size")
        dense_layers = len(raw.get("mlp_only_layers") or [])
        kv, hd = size("num_key_value_heads", heads), size("head_dim", hidden // heads)
        attn = 2 * hidden * heads * hd + 2 * hidden * kv * hd + 2 * hidden
        attn += 2 * hd if family == "qwen3_moe" else 0  # Q/K norms, per head
        attn += (heads + kv) * hd if family == "minimax_m2" else 0  # Q/K norms, whole width
        router = hidden * experts + (experts if family == "minimax_m2" else 0)  # + its bias
    if not 0 < top_k <= experts:
        raise ModelConfigError(f"sim.model: {path}: num_experts_per_tok {top_k} must lie in "
                               f"1..{experts} experts")
    moe_layers = layers - dense_layers
    expert = 3 * hidden * width
    total = (layers * attn + dense_layers * dense_mlp
             + moe_layers * (router + (experts + shared) * expert) + embed)
    active = (layers * attn + dense_layers * dense_mlp
              + moe_layers * (router + (top_k + shared) * expert) + embed)
    out.update(experts=experts, experts_per_token=top_k, expert_intermediate=width,
               expert_params_b=round(moe_layers * experts * expert / 1e9, 3))
    return out, total, active


def param_count(family: str, layers: int, hidden: int, heads: int, kv_heads: int,
                head_dim: int, inter: int, vocab: int, tied: bool) -> int:
    """Parameters of a dense SwiGLU decoder: attention (QKV biases for Qwen2, Q/K norms for
    Qwen3), gate/up/down MLP, two norms a layer, embeddings (once when tied), final norm."""
    q, kv = heads * head_dim, kv_heads * head_dim
    attn = hidden * q + 2 * hidden * kv + q * hidden
    attn += {"qwen2": q + 2 * kv, "qwen3": 2 * head_dim}.get(family, 0)
    per_layer = attn + 3 * hidden * inter + 2 * hidden
    return layers * per_layer + hidden + vocab * hidden * (1 if tied else 2)


def preset_config(model: Any) -> dict[str, Any]:
    """A config.json for a preset, with the fields the estimator reads: the config the
    preset was read from where it names one (every MoE preset), else one written from the
    sizes. Qwen2.5 presets are Qwen2 architectures (QKV biases), the others Qwen3 (Q/K
    norms)."""
    if model.config:
        return dict(json.loads(config_file(model.config).read_text("utf-8")))
    if model.is_moe:
        raise ModelConfigError(f"sim.model: preset {model.name!r} is a mixture of experts; "
                               f"give it `config` (the path of its config.json)")
    qwen2 = model.name.lower().startswith("qwen2")
    return {
        "architectures": ["Qwen2ForCausalLM" if qwen2 else "Qwen3ForCausalLM"],
        "model_type": "qwen2" if qwen2 else "qwen3",
        "_name_or_path": model.name,
        "hidden_size": model.hidden, "num_attention_heads": model.heads,
        "num_key_value_heads": model.kv_heads, "head_dim": model.head_dim,
        "num_hidden_layers": model.layers, "intermediate_size": model.intermediate,
        "vocab_size": model.vocab, "tie_word_embeddings": model.tied_embeddings,
        "torch_dtype": "bfloat16", "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-6, "hidden_act": "silu",
    }
