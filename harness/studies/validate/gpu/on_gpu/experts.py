"""The experts' FFN of one MoE layer, timed three ways, for `train_measure` (torch only).

A layer of T tokens routes each token to `topk` of `experts` experts; each expert runs a
gated FFN (hidden -> 2*inter, SiLU(gate) * up, inter -> hidden) on its share. The database's
`moe` table (aiconfigurator-core, `systems/data/h100_sxm/moe/<framework>/<version>/
moe_perf.parquet`: latency by num_tokens, hidden_size, inter_size, topk, num_experts and a
routing `distribution`) times a serving engine's fused MoE forward for exactly this. Here:

- `grouped`: top-k of router scores, tokens sorted by expert (gather), the two products as
  `torch._grouped_mm` over the experts' stacked weights, the gate, and the weighted sum
  back (index_add): one pass of a serving engine's fused MoE, forward only;
- `grouped_gemms`: the two grouped products and the gate alone, on tokens already sorted by
  expert (no routing, gather or weighted sum): what the GEMM kernels themselves cost;
- `sequential`: the same as `grouped` with one `F.linear` per expert in a Python loop, as
  Megatron-core's `SequentialMLP` does when no grouped-GEMM kernel is installed;
- `grouped_fwdbwd`: `grouped` forward and backward (weights and input need gradients), the
  trainer's cost of the experts per micro-batch.

Routing is balanced, as the table's `balanced` rows: token t's j-th choice is expert
(t * topk + j) mod experts, so every expert gets T * topk / experts tokens.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F


def balanced_choice(tokens: int, topk: int, experts: int, device: str) -> torch.Tensor:
    """(tokens, topk) expert ids, each expert chosen equally often (up to one)."""
    ids = torch.arange(tokens * topk, device=device).view(tokens, topk)
    return ids % experts


class Experts:
    """Stacked expert weights and the three ways of running them on T tokens."""

    def __init__(self, hidden: int, inter: int, experts: int, topk: int, device: str,
                 grad: bool = False) -> None:
        self.hidden, self.inter, self.experts, self.topk = hidden, inter, experts, topk
        scale = hidden ** -0.5
        # Stored (experts, out, in) like F.linear weights; _grouped_mm takes (in, out) views.
        self.w1 = (torch.randn(experts, 2 * inter, hidden, device=device,
                               dtype=torch.bfloat16) * scale).requires_grad_(grad)
        self.w2 = (torch.randn(experts, hidden, inter, device=device,
                               dtype=torch.bfloat16) * inter ** -0.5).requires_grad_(grad)
        self.device = device

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                              torch.Tensor]:
        """Sorted token ids, their gate weights, expert ends (int32) and per-expert counts."""
        tokens = x.shape[0]
        choice = balanced_choice(tokens, self.topk, self.experts, self.device)
        weight = torch.softmax(torch.randn(tokens, self.topk, device=self.device), dim=-1)
        flat = choice.flatten()
        order = torch.argsort(flat, stable=True)
        counts = torch.bincount(flat, minlength=self.experts)
        ends = torch.cumsum(counts, 0).to(torch.int32)
        return order // self.topk, weight.flatten()[order].to(x.dtype), ends, counts

    def grouped(self, x: torch.Tensor, routed: tuple) -> torch.Tensor:
        token_of, gate_w, ends, _ = routed
        xs = x.index_select(0, token_of)
        h = torch._grouped_mm(xs, self.w1.transpose(-2, -1), offs=ends)
        gate, up = h.chunk(2, dim=-1)
        y = torch._grouped_mm(F.silu(gate) * up, self.w2.transpose(-2, -1), offs=ends)
        out = torch.zeros_like(x)
        return out.index_add(0, token_of, y * gate_w[:, None])

    def gemms_only(self, xs: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
        h = torch._grouped_mm(xs, self.w1.transpose(-2, -1), offs=ends)
        gate, up = h.chunk(2, dim=-1)
        return torch._grouped_mm(F.silu(gate) * up, self.w2.transpose(-2, -1), offs=ends)

    def sequential(self, x: torch.Tensor, routed: tuple, counts_host: list[int]
                   ) -> torch.Tensor:
        token_of, gate_w, _, _ = routed
        xs = x.index_select(0, token_of)
        parts, start = [], 0
        for e, n in enumerate(counts_host):
            h = F.linear(xs[start:start + n], self.w1[e])
            gate, up = h.chunk(2, dim=-1)
            parts.append(F.linear(F.silu(gate) * up, self.w2[e]))
            start += n
        y = torch.cat(parts)
        out = torch.zeros_like(x)
        return out.index_add(0, token_of, y * gate_w[:, None])


def grouped_supported(device: str) -> str:
    """'' when `torch._grouped_mm` runs here, else why not (first line of the error)."""
    try:
        e = Experts(64, 32, 4, 2, device)
        x = torch.randn(16, 64, device=device, dtype=torch.bfloat16)
        e.grouped(x, e.route(x))
        return ""
    except (RuntimeError, AttributeError, NotImplementedError) as err:
        return str(err).splitlines()[0][:120]


def points(hidden: int, inter: int, experts: int, topk: int, tokens: int, device: str
           ) -> dict[str, Callable[[], object]]:
    """The callables to time at T = `tokens`: forward ones graph-capturable, the
    forward-backward one eager (its autograd state is rebuilt each call)."""
    e = Experts(hidden, inter, experts, topk, device)
    x = torch.randn(tokens, hidden, device=device, dtype=torch.bfloat16)
    routed = e.route(x)
    counts = [int(c) for c in routed[3].tolist()]
    out: dict[str, Callable[[], object]] = {
        "sequential": lambda: e.sequential(x, routed, counts)}
    if grouped_supported(device) == "":
        out["grouped"] = lambda: e.grouped(x, routed)
        xs = x.index_select(0, routed[0])
        out["grouped_gemms"] = lambda: e.gemms_only(xs, routed[2])
        t = Experts(hidden, inter, experts, topk, device, grad=True)
        xg = torch.randn(tokens, hidden, device=device, dtype=torch.bfloat16,
                         requires_grad=True)
        routed_g = t.route(xg.detach())

        def fwdbwd() -> None:
            t.grouped(xg, routed_g).float().square().mean().backward()
            t.w1.grad = t.w2.grad = xg.grad = None

        out["grouped_fwdbwd"] = fwdbwd
    return out
