"""A Qwen3-style dense decoder built from a model preset, random weights, static shapes.

Why our own and not transformers': a serving engine runs a decode step as one captured CUDA
graph over a preallocated KV cache, and the measured-kernel database prices exactly those
kernels. A decoder with fixed shapes and its cache as plain tensors can be captured as a
graph too, so what we time is the GPU's work, not Python's launch overhead. It does what an
engine's step does per layer: RMSNorm, the QKV product, per-head q/k RMSNorm, rotary
embedding, the new token's K and V written into the cache, attention over the cache, the
output product, RMSNorm, the gated MLP, two residual adds; then the final norm, the LM head
and a greedy pick. It leaves out what the engine adds around the GPU (scheduling,
sampling parameters, detokenising).

Grouped-query decode attention: the query heads that share a KV head are laid out as that
KV head's query rows, so one non-causal attention over the cache serves the whole group
without repeating K and V (`decode_attention`; checked against the repeated form in tests).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from harness.sim.presets import Model

EPS = 1e-6  # Qwen3's rms_norm_eps


def q_width(model: Model) -> int:
    return model.heads * model.head_dim


def kv_width(model: Model) -> int:
    return model.kv_heads * model.head_dim


def gemms(model: Model) -> dict[str, tuple[int, int]]:
    """Every weight product of one layer and the LM head: name -> (k, n) of (m,k)x(k,n)."""
    return {"qkv": (model.hidden, q_width(model) + 2 * kv_width(model)),
            "o": (q_width(model), model.hidden),
            "gate_up": (model.hidden, 2 * model.intermediate),
            "down": (model.intermediate, model.hidden),
            "lm_head": (model.hidden, model.vocab)}


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """torch's own RMSNorm: one fused kernel on a GPU, as engines run it."""
    return F.rms_norm(x, weight.shape, weight, eps)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of the last dim (halves rotated), cos/sin broadcast over heads."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def rotary(positions: torch.Tensor, head_dim: int, dtype: torch.dtype, theta: float = 1e6
           ) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32,
                                       device=positions.device) / head_dim)
    angles = positions.float()[:, None] * inv[None, :]
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """One new token per sequence against its cache. q: (b, heads, d); k, v: (b, kv, c, d).
    Returns (b, heads, d)."""
    b, heads, d = q.shape
    kv = k.shape[1]
    grouped = q.view(b, kv, heads // kv, d)
    return F.scaled_dot_product_attention(grouped, k, v).reshape(b, heads, d)


class Decoder:
    """Random bf16 weights for `dims` on `device`; `decode` and `prefill` are pure functions
    of preallocated tensors, so both can be captured as CUDA graphs."""

    def __init__(self, dims: Model, device: str, dtype: torch.dtype = torch.bfloat16,
                 seed: int = 0) -> None:
        gen = torch.Generator(device=device).manual_seed(seed)
        self.dims, self.device, self.dtype = dims, device, dtype

        def weight(k: int, n: int) -> torch.Tensor:
            w = torch.empty(n, k, device=device, dtype=dtype)
            return w.normal_(0.0, k ** -0.5, generator=gen)

        def ones(n: int) -> torch.Tensor:
            return torch.ones(n, device=device, dtype=dtype)

        shapes = gemms(dims)
        self.layers = [{"ln1": ones(dims.hidden), "ln2": ones(dims.hidden),
                        "q_norm": ones(dims.head_dim), "k_norm": ones(dims.head_dim),
                        **{name: weight(*shapes[name]) for name in ("qkv", "o", "gate_up",
                                                                     "down")}}
                       for _ in range(dims.layers)]
        self.final_norm = ones(dims.hidden)
        self.embed = weight(dims.hidden, dims.vocab)  # (vocab, hidden): rows are embeddings
        self.lm_head = weight(*shapes["lm_head"])
        self.layer_step = self.decode_layer

    def _qkv(self, layer: dict, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x: (tokens, hidden) -> q (tokens, heads, d), k and v (tokens, kv, d), rotated."""
        d = self.dims
        qkv = F.linear(rms_norm(x, layer["ln1"], EPS), layer["qkv"])
        q, k, v = qkv.split((q_width(d), kv_width(d), kv_width(d)), dim=-1)
        q = rms_norm(q.view(-1, d.heads, d.head_dim), layer["q_norm"], EPS)
        k = rms_norm(k.view(-1, d.kv_heads, d.head_dim), layer["k_norm"], EPS)
        c, s = cos[:, None, :], sin[:, None, :]
        return rotate(q, c, s), rotate(k, c, s), v.view(-1, d.kv_heads, d.head_dim)

    def _mlp(self, layer: dict, x: torch.Tensor) -> torch.Tensor:
        gate, up = F.linear(rms_norm(x, layer["ln2"], EPS),
                            layer["gate_up"]).chunk(2, dim=-1)
        return F.linear(F.silu(gate) * up, layer["down"])

    def decode_layer(self, layer: dict, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                     k_cache: torch.Tensor, v_cache: torch.Tensor, position: int
                     ) -> torch.Tensor:
        """One layer of a decode step (`layer_step` calls it; `compile_layers` swaps in a
        compiled copy, whose fused norms, rotary and cache write are an engine's)."""
        q, k, v = self._qkv(layer, x, cos, sin)
        k_cache[:, :, position].copy_(k)
        v_cache[:, :, position].copy_(v)
        att = decode_attention(q, k_cache, v_cache)
        x = x + F.linear(att.reshape(-1, q_width(self.dims)), layer["o"])
        return x + self._mlp(layer, x)

    def compile_layers(self) -> None:
        """Decode with one torch.compile'd layer, shared by every layer (same shapes)."""
        torch._dynamo.reset()  # a fresh cache per model: no silent fall-back to eager
        torch._dynamo.config.cache_size_limit = 64  # a compile per (batch, context)
        self.layer_step = torch.compile(self.decode_layer, dynamic=False)

    def decode(self, tokens: torch.Tensor, position: int,
               cache: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        """One decode step: tokens (b,) at `position` (the cache's last slot, written here);
        cache[i] = (k, v) of layer i, each (b, kv, position + 1, d). Returns next tokens."""
        d = self.dims
        x = F.embedding(tokens, self.embed)
        pos = torch.full((tokens.shape[0],), position, device=tokens.device)
        cos, sin = rotary(pos, d.head_dim, self.dtype)
        for layer, (k_cache, v_cache) in zip(self.layers, cache, strict=True):
            x = self.layer_step(layer, x, cos, sin, k_cache, v_cache, position)
        logits = F.linear(rms_norm(x, self.final_norm, EPS), self.lm_head)
        return logits.argmax(-1)

    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        """One prompt, tokens (c,): causal attention over itself; the LM head on its last
        token only, as engines do. Returns the first generated token."""
        d = self.dims
        c = tokens.shape[0]
        x = F.embedding(tokens, self.embed)
        cos, sin = rotary(torch.arange(c, device=tokens.device), d.head_dim, self.dtype)
        for layer in self.layers:
            q, k, v = self._qkv(layer, x, cos, sin)
            att = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k.transpose(0, 1)[None],
                                                 v.transpose(0, 1)[None], is_causal=True,
                                                 enable_gqa=True)
            x = x + F.linear(att[0].transpose(0, 1).reshape(c, q_width(d)), layer["o"])
            x = x + self._mlp(layer, x)
        logits = F.linear(rms_norm(x[-1:], self.final_norm, EPS), self.lm_head)
        return logits.argmax(-1)
