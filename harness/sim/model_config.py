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

# Architectures whose parameter count the formula below gets right (dense, SwiGLU MLP).
_DENSE = {"Qwen3ForCausalLM": "qwen3", "Qwen2ForCausalLM": "qwen2",
          "LlamaForCausalLM": "llama", "MistralForCausalLM": "llama"}


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
    arch = (raw.get("architectures") or ["?"])[0]
    family = _DENSE.get(arch)
    if family is None:
        raise ModelConfigError(f"sim.model: {path}: architecture {arch!r} is not modelled "
                               f"(dense decoders only: {', '.join(sorted(_DENSE))})")
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
    params = param_count(family, layers, hidden, heads, kv_heads, head_dim, inter, vocab, tied)
    return dict(name=str(raw.get("_name_or_path") or path.parent.name or path.stem),
                params_b=round(params / 1e9, 3), layers=layers, hidden=hidden, heads=heads,
                kv_heads=kv_heads, head_dim=head_dim, intermediate=inter, vocab=vocab,
                tied_embeddings=tied, source=str(path))


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
    """A config.json for a preset, with the fields the estimator reads. Qwen2.5 presets
    are Qwen2 architectures (QKV biases), the others Qwen3 (Q/K norms)."""
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
