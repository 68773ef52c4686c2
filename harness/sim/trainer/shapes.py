"""The matrix products of one transformer layer at a trainer's shapes, and their backward.

A layer's forward is four products per token row (Qwen3/Llama layout): QKV projection
(hidden -> (heads + 2 kv heads) x head dim), output projection (heads x head dim ->
hidden), the MLP's gate and up together (hidden -> 2 x intermediate) and its down
(intermediate -> hidden); a MoE layer's experts go to the `moe` table instead, leaving the
router (hidden -> experts). Tensor parallelism splits the first of each pair by columns
and the second by rows: every product's n or k shrinks by TP. The LM head (hidden ->
vocab, split by TP) is one more product per token, once per model.

A backward is two products of the forward's shapes (Megatron's and PyTorch's linear
layers alike): the input's gradient dX = dY W (m x n)(n x k), "dgrad", and the weight's
gradient dW = X^T dY (k x m)(m x n), "wgrad". Each does the forward's 2 m n k FLOPs.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.sim.presets import Model


@dataclass(frozen=True)
class Gemm:
    """An (m x k)(k x n) product."""

    m: int
    n: int
    k: int

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    def dgrad(self) -> Gemm:
        """dX = dY W: (m x n)(n x k)."""
        return Gemm(self.m, self.k, self.n)

    def wgrad(self) -> Gemm:
        """dW = X^T dY: (k x m)(m x n)."""
        return Gemm(self.k, self.n, self.m)


def layer_gemms(model: Model, tokens: int, tp: int = 1) -> list[Gemm]:
    """The dense products of one layer's forward for `tokens` token rows on one GPU of a
    TP group of `tp` (a MoE layer's experts are not among them: `moe_layer`)."""
    qkv = (model.heads + 2 * model.kv_heads) * model.head_dim
    attn_out = model.heads * model.head_dim
    out = [Gemm(tokens, qkv // tp, model.hidden), Gemm(tokens, model.hidden, attn_out // tp)]
    if model.is_moe:
        out.append(Gemm(tokens, model.experts, model.hidden))  # the router
    else:
        out += [Gemm(tokens, 2 * model.intermediate // tp, model.hidden),
                Gemm(tokens, model.hidden, model.intermediate // tp)]
    return out


def head_gemm(model: Model, tokens: int, tp: int = 1) -> Gemm:
    """The LM head's product (the logits a policy loss needs), split by TP."""
    return Gemm(tokens, model.vocab // tp, model.hidden)


def attention_flops_forward(model: Model, seq_len: int) -> float:
    """Causal attention FLOPs of one sequence over every layer: QK^T and PV, 2 x 2 x heads
    x head dim per (query, key) pair, half the pairs under the causal mask."""
    return 4.0 * model.layers * model.heads * model.head_dim * seq_len * seq_len / 2
