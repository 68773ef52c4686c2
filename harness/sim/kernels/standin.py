"""Carry one GPU's measured per-op times over to another GPU, op class by op class.

Why: a GPU without its own tables (H20, A100 PCIe, ...) borrows another GPU's. One scale
for the whole step (the HBM ratio) is right only where every op is bound by memory; a decode
step at batch 256+ has its GEMMs bound by FLOPs, small kernels bound by launch latency, and
the all-reduce bound by the link. Tested inside the database (H200 -> H100, H100 -> A100)
the one ratio missed by 8-21% at the median (`harness/studies/validate/gpu/standin.py`).

The rule (the project's own): each op is given the bytes it must move and the FLOPs it must
do (from the model's config.json, `op_shapes`), which places it on each GPU's datasheet
roofline, `R = max(bytes / HBM bandwidth, FLOPs / BF16 peak)`. The measured source time is
split into that roofline time and the rest; the roofline part is replaced by the target's
roofline, and the rest is carried over:

    target = R_dst + (source - R_src) * k

k = 1 for attention and elementwise ops: what they spend above the roofline is kernel launch
and latency, which follows neither HBM nor Tensor Cores. For GEMM and MoE,
k = 1 + (peak_src / peak_dst - 1) * s, where s in [0, 1] is the share of the op's source
roofline that is FLOPs (`flops / peak_src / R_src`): a GEMV at batch 1 (s near 0) keeps its
launch and tail time, a compute-bound GEMM (s = 1) has its tile and wave losses scaled with
the Tensor-Core peak. So a memory-bound op that runs at its roofline scales by exactly the
bandwidth ratio, a compute-bound GEMM by exactly the FLOPs ratio, a launch-bound norm at
batch 1 does not move, and between two GPUs of one die (H200 and H100) only the roofline
part moves. The crossover is the op's arithmetic intensity against each GPU's balance
(FLOPs / bandwidth), not a fixed batch. Where the source ran faster than its roofline (the
byte count is an estimate), the ratio `source * R_dst / R_src` is used instead.

Tested (the study above): within one die the rule is within 2% at the median, the one
ratio 5-12%. Across a generation (H100 -> A100) everything off the roofline is slower on
the older GPU (its attention kernels most), which no datasheet ratio carries: there the
rule is better on prefill and no better than the one ratio on decode. Scaling all of a
GEMM's excess by the FLOPs ratio fits A100 better but has H20 (a Hopper die whose Tensor
Cores alone are cut to 15%) decode at batch 1 2.3x slower than H200 on 83% of its
bandwidth, which its bandwidth-bound GEMVs cannot be; the share keeps that at 1.13x.

Classes:

- gemm / moe: FLOPs 2*m*n*k, bytes of weights and activations (MoE: the experts the batch
  touches); memory-bound at small token counts, compute-bound at large ones.
- attention: decode reads the KV cache (bandwidth); prefill is FLOPs (causal, 2*s^2*d).
- elementwise (norms, activation, embedding): bytes only.
- comm (all-reduce, p2p, MoE dispatch): kept as measured where the two GPUs share the same
  interconnect (`Hardware.link`); otherwise scaled by the link's latency-plus-bandwidth time
  of one message of `tokens * hidden` BF16 values (datasheet link facts, hardware.toml).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from harness.sim.model_config import config_fields
from harness.sim.presets import Hardware, Model

BYTES = 2  # BF16 weights, activations and KV cache
_COMM = re.compile(r"((^|_)ar(_\d+)?$)|p2p|all_?reduce|dispatch")


@dataclass(frozen=True)
class OpShape:
    """What one op of a step must do, summed over the layers: its class, FLOPs, bytes moved
    through HBM, and for comm the bytes and count of its messages."""

    cls: str  # "gemm", "attention", "elementwise" or "comm"
    flops: float = 0.0
    bytes: float = 0.0
    message_bytes: float = 0.0
    calls: int = 0


@dataclass(frozen=True)
class Dims:
    """The sizes of a decoder that the shapes need, read from a Hugging Face config.json."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    experts: int = 0  # routed experts (0: dense)
    topk: int = 0
    moe_intermediate: int = 0

    @classmethod
    def of(cls, model: Model) -> Dims:
        """A model's sizes as the shapes name them (a dense model's MLP as its experts')."""
        return cls(layers=model.layers, hidden=model.hidden, heads=model.heads,
                   kv_heads=model.kv_heads, head_dim=model.head_dim,
                   intermediate=model.intermediate, vocab=model.vocab, experts=model.experts,
                   topk=model.experts_per_token,
                   moe_intermediate=model.expert_intermediate or model.intermediate)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Dims:
        """A config.json's sizes, read the way the simulator reads a model
        (`harness.sim.model_config`)."""
        return cls.of(Model(**config_fields(config)))


def _gemm(m: float, n: float, k: float, layers: int, wbytes: float) -> OpShape:
    """FLOPs are counted at the BF16 peak: FP8 weights (wbytes 1) run on Tensor Cores at twice
    that rate on Hopper (H100 1,979 against 989.4 TFLOPS dense; H20 296 against 148), so
    their FLOPs count half."""
    return OpShape("gemm", 2.0 * m * n * k * layers * wbytes / BYTES,
                   (wbytes * n * k + BYTES * (m * k + m * n)) * layers)


def op_shapes(dims: Dims, tp: int, batch: int, length: int, phase: str,
              weight_bytes: float = BYTES, kv_bytes: float = BYTES) -> dict[str, OpShape]:
    """The shape of each op, per GPU at tensor parallelism `tp`, keyed by the estimator's op
    names (no prefix): one decode step of `batch` sequences holding `length` tokens each
    (phase "decode"), or the prefill of `batch` prompts of `length` tokens ("prefill").
    `weight_bytes` and `kv_bytes` are 1 for FP8 weights and KV cache."""
    d, L, w = dims, dims.layers, weight_bytes
    q, kv = d.heads * d.head_dim / tp, d.kv_heads * d.head_dim / tp
    if phase == "decode":  # one new token per sequence, which reads its whole KV cache
        m = float(batch)
        attention = OpShape("attention", 4.0 * m * length * q * L,
                            m * (kv_bytes * 2 * length * kv + BYTES * 2 * q) * L)
    else:  # causal self-attention over each prompt: half its s x s score matrix
        m = float(batch * length)
        attention = OpShape("attention", 2.0 * m * length * q * L,
                            BYTES * m * (2 * q + 2 * kv) * L)
    message = BYTES * m * d.hidden
    shapes = {
        "embedding": OpShape("elementwise", bytes=2 * BYTES * m * d.hidden),
        "add_norm_1": OpShape("elementwise", bytes=4 * BYTES * m * d.hidden * L),
        "add_norm_2": OpShape("elementwise", bytes=4 * BYTES * m * d.hidden * L),
        "act_gate": OpShape("elementwise", bytes=3 * BYTES * m * d.intermediate / tp * L),
        "qkv_gemm": _gemm(m, q + 2 * kv, d.hidden, L, w),
        "attention": attention,
        "proj_gemm": _gemm(m, d.hidden, q, L, w),
        "gate_ffn1_gemm": _gemm(m, 2 * d.intermediate / tp, d.hidden, L, w),
        "ffn2_gemm": _gemm(m, d.hidden, d.intermediate / tp, L, w),
        "logits_gemm": _gemm(m if phase == "decode" else batch, d.vocab / tp, d.hidden, 1,
                             BYTES),
        "router_gemm": _gemm(m, d.experts, d.hidden, L, w),
        "embedding_ar": OpShape("comm", message_bytes=message, calls=1),
        "ar_1": OpShape("comm", message_bytes=message, calls=L),
        "ar_2": OpShape("comm", message_bytes=message, calls=L),
    }
    if d.experts:  # each token runs topk experts; the batch touches min(E, m*topk) of them
        width = 3 * d.hidden * d.moe_intermediate / tp
        touched = min(float(d.experts), m * d.topk)
        shapes["moe"] = OpShape("gemm", 2.0 * m * d.topk * width * L * w / BYTES,
                                (w * touched * width + BYTES * 2 * m * d.topk * d.hidden) * L)
    return shapes


def shape_of(name: str, shapes: dict[str, OpShape]) -> OpShape | None:
    """An op's shape; an op the table does not name is comm by its name, else None."""
    if name in shapes:
        return shapes[name]
    return OpShape("comm") if _COMM.search(name) else None


def roofline_ms(shape: OpShape, hw: Hardware) -> float:
    """The op's datasheet floor on `hw`: the slower of moving its bytes and doing its FLOPs."""
    return 1e3 * max(shape.bytes / (hw.hbm_bandwidth_gbs * 1e9),
                     shape.flops / (hw.bf16_tflops * 1e12))


def _link_ms(shape: OpShape, hw: Hardware) -> float:
    per_call = hw.link_latency_us * 1e-6 + shape.message_bytes / (hw.link_bandwidth_gbs * 1e9)
    return 1e3 * per_call * max(shape.calls, 1)


def carry(ms: float, shape: OpShape, src: Hardware, dst: Hardware) -> float:
    """One op's measured `ms` on `src`, predicted on `dst` (see the module's docstring)."""
    if ms <= 0.0:
        return 0.0
    if shape.cls == "comm":
        if src.link == dst.link:
            return ms
        return ms * _link_ms(shape, dst) / _link_ms(shape, src)
    r_src, r_dst = roofline_ms(shape, src), roofline_ms(shape, dst)
    if r_src <= 0.0:
        return ms
    if ms < r_src:
        return ms * r_dst / r_src
    k = 1.0
    if shape.cls == "gemm":
        share = 1e3 * shape.flops / (src.bf16_tflops * 1e12) / r_src
        k += (src.bf16_tflops / dst.bf16_tflops - 1.0) * share
    return r_dst + (ms - r_src) * k


def carry_ops(ops: dict[str, float], dims: Dims, tp: int, batch: int, length: int,
              phase: str, src: Hardware, dst: Hardware, weight_bytes: float = BYTES,
              kv_bytes: float = BYTES) -> dict[str, float]:
    """Every op of a step measured on `src` (the estimator's `decode_ops(batch, context)`
    or `prefill_ops(prompt)` with batch 1), predicted on `dst`; the step is their sum. An
    op without a shape here (another architecture's: MLA, mamba, ...) takes the one ratio,
    HBM for a decode step and BF16 FLOPs for a prefill, as a stand-in did before."""
    shapes = op_shapes(dims, tp, batch, length, phase, weight_bytes, kv_bytes)
    if phase == "decode":
        fallback = src.hbm_bandwidth_gbs / dst.hbm_bandwidth_gbs
    else:
        fallback = src.bf16_tflops / dst.bf16_tflops
    out: dict[str, float] = {}
    for name, ms in ops.items():
        shape = shape_of(name, shapes)
        out[name] = ms * fallback if shape is None else carry(ms, shape, src, dst)
    return out


def op_class(name: str) -> str:
    """The class an op's name belongs to, for reporting (`moe` apart from dense GEMMs)."""
    if name == "moe":
        return "moe"
    if _COMM.search(name):
        return "comm"
    if name.endswith("gemm"):
        return "gemm"
    return "attention" if name == "attention" else "elementwise"
