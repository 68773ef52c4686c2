"""Roofline step-time models for the simulated engine and trainer.

Decode: one step produces one token for each of the b running sequences. It
reads the weights once and the whole KV cache of the batch (S context tokens)
from HBM, does 2*N FLOPs per sequence, and with tensor parallelism performs two
all-reduces per layer. Step time is

    overhead + allreduce(b) + max(memory(S), compute(b))

where memory(S) = (weight bytes + S * KV bytes per token) / (tp * BW * bw_eff).
Because S grows by b every step while b is fixed between scheduling events,
the time of n steps has a closed form and the engine can jump n steps at once.

Trainer: 8*N FLOPs per token (forward and backward, 6N, plus the forward pass
that recomputes the old-policy log-probs, 2N) and causal attention, spread over
the trainer's GPUs at a model FLOPs utilisation (MFU) that calibration fits. N counts
active parameters (a MoE token's top-k experts); under expert parallelism each MoE layer
adds its tokens' all-to-all over the trainer GPU's link, not overlapped with compute.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from harness.sim.kernels.table import coefficients as interpolate
from harness.sim.presets import Hardware, Model


class StepJump:
    """Finding how many steps fit in a span, for any step model with `steps_time`; and
    the prefill of an admission, from the model's prefill fields."""

    prefill_per_token_s: float
    admit_per_request_s: float
    prefill_per_token2_s: float  # per squared prompt token (attention); 0 on the roofline
    prefill_fixed_s: float  # per admission that admits anything (one prefill launch)
    prefill_lanes: int = 1  # attention-DP ranks: each prefills its own share of an admission

    def steps_time(self, n: int, b: int, ctx: int) -> float:
        raise NotImplementedError

    def prefill_time(self, tokens: int, squares: int, admitted: int) -> float:
        """Seconds to prefill `admitted` prompts of `tokens` tokens in all (`squares`: the
        sum of each prompt's tokens squared) admitted at once."""
        if admitted == 0:
            return 0.0
        if self.prefill_lanes != 1:  # attention DP: the prompts spread over the ranks
            return self.prefill_fixed_s + (
                tokens * self.prefill_per_token_s + squares * self.prefill_per_token2_s
                + admitted * self.admit_per_request_s) / min(admitted, self.prefill_lanes)
        return (self.prefill_fixed_s + tokens * self.prefill_per_token_s
                + squares * self.prefill_per_token2_s + admitted * self.admit_per_request_s)

    def steps_completed(self, dt: float, b: int, ctx: int, cap: int) -> int:
        """The most steps (<= cap) that fit entirely within dt; none while dt <= 0
        (a segment starts after the prefill of what it admitted, so an engine cut
        during that prefill is asked about a negative dt)."""
        k = self.steps_within(dt, b, ctx, cap)
        if k == 0:
            return 0
        return k if self.steps_time(k, b, ctx) <= dt + 1e-12 else k - 1

    def steps_within(self, dt: float, b: int, ctx: int, cap: int) -> int:
        """The fewest steps (<= cap) whose total time reaches dt: the step running
        at dt counts, since an engine finishes the step it is in."""
        if dt <= 0:
            return 0
        lo, hi = 1, cap
        if self.steps_time(hi, b, ctx) < dt:
            return cap
        while lo < hi:
            mid = (lo + hi) // 2
            if self.steps_time(mid, b, ctx) >= dt:
                hi = mid
            else:
                lo = mid + 1
        return lo


@dataclass(frozen=True)
class DecodeModel(StepJump):
    """Step time of a tensor-parallel engine replica, in seconds: the roofline."""

    fixed_s: float  # per step: scheduler/launch overhead and all-reduce latency
    per_seq_s: float  # per running sequence: all-reduce bytes
    weights_s: float  # reading the weights once
    per_ctx_token_s: float  # reading one context token's KV cache
    compute_per_seq_s: float  # 2N FLOPs for one sequence's new token
    prefill_per_token_s: float  # prompt (or recompute) tokens admitted
    admit_per_request_s: float = 0.0  # fixed cost of taking a request in (measured engines)
    prefill_per_token2_s: float = 0.0
    prefill_fixed_s: float = 0.0
    # A probe knob (harness/sim/knobs.py), off by default: steps of at most `small_batch`
    # sequences take `small_batch_scale` times as long.
    small_batch: int = 0
    small_batch_scale: float = 1.0
    # A MoE: reading all routed experts once, and the share of them one token routes to
    # (k / E); a step of b sequences reads 1 - (1 - k/E)^b of them (uniform routing).
    experts_s: float = 0.0
    route_share: float = 0.0

    @classmethod
    def measured(cls, d: dict[str, float]) -> DecodeModel:
        """A live engine's decode model from a calibration's `[decode]` table
        (`calibrate engine`): a linear step time, no roofline terms."""
        return cls(d["fixed_s"], d["per_seq_s"], 0.0, d["per_ctx_token_s"], 0.0,
                   d["prefill_per_token_s"], d.get("admit_per_request_s", 0.0))

    @classmethod
    def build(
        cls,
        hw: Hardware,
        model: Model,
        tp: int,
        bw_eff: float,
        step_overhead_s: float,
        compute_eff: float,
        weight_bytes: float = 2,
        kv_bytes: float = 2,
    ) -> DecodeModel:
        """The roofline of a replica; `weight_bytes` and `kv_bytes` per weight and cached
        element (1 for FP8). FP8 is priced by its bytes only: the compute terms stay at
        the BF16 peak (decode is bound by bandwidth at RL's batches)."""
        bw = tp * hw.hbm_bandwidth_gbs * 1e9 * bw_eff
        flops = tp * hw.bf16_tflops * 1e12 * compute_eff
        allreduces = 2 * model.layers if tp > 1 else 0
        # Ring all-reduce moves 2(tp-1)/tp of the activation bytes per GPU; a TP group
        # wider than the NVLink domain crosses the servers' NICs (Hardware.tp_link).
        bytes_per_seq = allreduces * model.hidden * 2 * 2 * (tp - 1) / tp
        link_gbs, link_us = hw.tp_link(tp)
        return cls(
            fixed_s=step_overhead_s + allreduces * link_us * 1e-6,
            per_seq_s=bytes_per_seq / (link_gbs * 1e9),
            weights_s=(model.params_b - model.expert_params_b) * 1e9 * weight_bytes / bw,
            per_ctx_token_s=model.kv_bytes_per_token(kv_bytes) / bw,
            compute_per_seq_s=model.flops_per_token_forward / flops,
            prefill_per_token_s=model.flops_per_token_forward / flops,
            experts_s=model.expert_params_b * 1e9 * weight_bytes / bw,
            route_share=model.experts_per_token / model.experts if model.is_moe else 0.0,
        )

    def steps_time(self, n: int, b: int, ctx: int) -> float:
        """Seconds for n decode steps of b sequences starting at ctx context tokens."""
        if n <= 0:
            return 0.0
        base = n * (self.fixed_s + self.per_seq_s * b)
        comp = self.compute_per_seq_s * b
        m0 = self.weights_s + self.per_ctx_token_s * ctx
        if self.experts_s:
            m0 += self.experts_s * (1.0 - (1.0 - self.route_share) ** b)
        slope = self.per_ctx_token_s * b  # memory time grows by this per step
        # Steps 0..j-1 are compute-bound, j..n-1 memory-bound.
        j = 0 if m0 >= comp else min(n, math.ceil((comp - m0) / slope) if slope > 0 else n)
        mem_steps = n - j
        mem = mem_steps * m0 + slope * (j * mem_steps + mem_steps * (mem_steps - 1) / 2)
        if b <= self.small_batch:
            return self.small_batch_scale * (base + j * comp + mem)
        return base + j * comp + mem


@dataclass(frozen=True)
class TableDecodeModel(StepJump):
    """Step time from a measured-kernel table (`harness.sim.kernels.table`), in seconds.

    Per batch b the step is linear in the context each sequence holds,
    a(b) + c(b) * ctx / b, so n steps starting at ctx context tokens in all take
    n * a(b) + c(b) * (n * ctx / b + n (n - 1) / 2): each step adds one token to every
    sequence. a and c are interpolated between the tabulated batches."""

    batches: tuple[int, ...]
    fixed_s: tuple[float, ...]
    per_ctx_s: tuple[float, ...]
    prefill_per_token_s: float
    prefill_per_token2_s: float = 0.0
    prefill_fixed_s: float = 0.0
    admit_per_request_s: float = 0.0
    small_batch: int = 0
    small_batch_scale: float = 1.0
    prefill_lanes: int = 1
    # (a, c) by batch, kept: every segment asks for one
    _coef: dict[int, tuple[float, float]] = field(default_factory=dict, init=False,
                                                  compare=False, repr=False)

    @classmethod
    def from_table(cls, table: Any) -> TableDecodeModel:
        """The table's model; an attention-DP table's prefill is one rank's, so an admission
        spreads over its `attention_dp` ranks (`prefill_lanes`)."""
        return cls(tuple(table.batches), tuple(ms / 1e3 for ms in table.fixed_ms),
                   tuple(ms / 1e3 for ms in table.per_ctx_ms),
                   table.prefill_per_token_ms / 1e3, table.prefill_per_token2_ms / 1e3,
                   table.prefill_fixed_ms / 1e3,
                   prefill_lanes=int(table.meta.get("attention_dp", 1)))

    def coefficients(self, b: int) -> tuple[float, float]:
        """(a, c) at batch b, computed once per batch (steps_time asks on every segment)."""
        cache = self._coef
        if b not in cache:
            cache[b] = interpolate(self.batches, self.fixed_s, self.per_ctx_s, b)
        return cache[b]

    def steps_time(self, n: int, b: int, ctx: int) -> float:
        if n <= 0:
            return 0.0
        try:
            a, c = self._coef[b]
        except KeyError:
            a, c = self.coefficients(b)
        t = n * a + c * (n * ctx / b + n * (n - 1) / 2)
        return self.small_batch_scale * t if b <= self.small_batch else t


def physical_floor(hw: Hardware, model: Model, tp: int, batch: int, ctx_tokens: int,
                   weight_bytes: float = 2, kv_bytes: float = 2) -> float:
    """The shortest decode step physics allows, in seconds: `batch` sequences holding
    `ctx_tokens` context tokens in all, on a TP-`tp` replica at the datasheet's peaks.

        max((weight bytes + ctx_tokens * KV bytes per token) / (tp * HBM bandwidth),
            (2N * batch + attention FLOPs over ctx_tokens) / (tp * peak BF16 FLOP/s))

    A MoE's step reads only the experts its batch routes to (`Model.step_weight_bytes`);
    `weight_bytes` and `kv_bytes` are per weight and cached element (2: BF16).
    Every byte a step must read is read once at the datasheet's HBM bandwidth, every
    FLOP it must do runs at the datasheet's dense peak, the two overlap perfectly, and
    nothing else costs anything: no all-reduce (its latency is an estimate, not a
    datasheet figure), no kernel launch, no scheduling. It is the bound a `would_need`
    step time is checked against (an engine may be slower, never faster), and unlike
    the step models it rests on no measurement and no fit."""
    memory = (model.step_weight_bytes(batch, weight_bytes)
              + ctx_tokens * model.kv_bytes_per_token(kv_bytes)) / (
        tp * hw.hbm_bandwidth_gbs * 1e9)
    flops = batch * model.flops_per_token_forward + model.attention_flops_forward(ctx_tokens)
    return max(memory, flops / (tp * hw.bf16_tflops * 1e12))


@dataclass(frozen=True)
class TrainModel:
    """Trainer compute time for a micro-batch of sequences."""

    flops_per_s: float  # sustained: GPUs x peak x MFU
    flops_per_token: float  # 8N: forward, backward and old-log-prob recompute (6N without)
    attn_coeff: float  # causal attention FLOPs = attn_coeff * L^2 per sequence
    micro_overhead_s: float
    optimizer_s: float
    per_sequence_s: float = 0.0  # fixed cost per sequence (a measured trainer's per-call cost)
    all_to_all_per_token_s: float = 0.0  # a MoE under EP: the experts' token exchange
    # each length's FLOPs, kept: a run prices the same lengths again and again
    _flops: dict[int, float] = field(default_factory=dict, init=False, compare=False,
                                     repr=False)

    @classmethod
    def build(
        cls, hw: Hardware, model: Model, gpus: int, mfu: float, micro_overhead_s: float,
        ep: int = 1, forwards: int = 1,
    ) -> TrainModel:
        """N is the ACTIVE parameter count (`Model.flops_per_token_forward`): a MoE token
        multiplies by its top-k experts only; the optimizer touches every parameter.
        `forwards`: forward passes a token gets besides the update's forward and backward
        (3 passes' FLOPs): 1 recomputes the old policy's log-probs (verl's old_log_prob),
        0 takes the engine's (verl fully-async's use_rollout_log_probs), 2 adds a frozen
        reference model's for a KL loss (verl's ref)."""
        passes = 3 + forwards
        # Attention: 4*layers*heads*head_dim FLOPs per (query, key) pair forward,
        # halved for the causal mask, times the passes.
        attn = 4 * model.layers * model.heads * model.head_dim * 0.5 * passes
        # Adam touches ~16 bytes of state per parameter, sharded over the GPUs.
        optim = 16 * model.params_b * 1e9 / (gpus * hw.hbm_bandwidth_gbs * 1e9)
        return cls(
            flops_per_s=gpus * hw.bf16_tflops * 1e12 * mfu,
            flops_per_token=passes * model.flops_per_token_forward,
            attn_coeff=attn,
            micro_overhead_s=micro_overhead_s,
            optimizer_s=optim,
            all_to_all_per_token_s=all_to_all_bytes_per_token(model, ep, forwards=forwards) / (
                gpus * hw.link_bandwidth_gbs * 1e9),
        )

    def micro_time(self, seq_lens: list[int]) -> float:
        flops_of = self._flops
        try:
            flops = sum(map(flops_of.__getitem__, seq_lens))
        except KeyError:
            for n in seq_lens:
                flops_of[n] = self.flops_per_token * n + self.attn_coeff * n * n
            flops = sum(map(flops_of.__getitem__, seq_lens))
        return (self.micro_overhead_s + self.per_sequence_s * len(seq_lens)
                + flops / self.flops_per_s + self.all_to_all_per_token_s * sum(seq_lens))


ALL_TO_ALLS_PER_MOE_LAYER = 6  # dispatch + combine in each of 2 forwards and 1 backward


def moe_layers(model: Model) -> int:
    """MoE layers of a model (0: dense): its routed experts' parameters over one layer's
    (E experts of 3 x hidden x expert width, SwiGLU). DeepSeek-V3's first 3 dense layers
    hold none, so it has 58 of its 61."""
    if not model.is_moe:
        return 0
    per_layer = model.experts * 3 * model.hidden * model.expert_intermediate
    return round(model.expert_params_b * 1e9 / per_layer)


def all_to_all_bytes_per_token(model: Model, ep: int, dtype_bytes: float = 2,
                               forwards: int = 1) -> float:
    """Bytes one trained token sends over the link for the experts' all-to-all in a train
    step: per MoE layer, per all-to-all, hidden x dtype bytes x top-k (one copy of the
    token per routed expert), of which (EP - 1) / EP go to other ranks under uniform
    routing (none at EP 1).

    Megatron-core's MoEAlltoAllTokenDispatcher (NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24
    714e3bedb2f5a39553:megatron/core/transformer/moe/token_dispatcher.py:375-387) permutes
    each token into top-k rows (num_out_tokens = tokens x topk, :556), sends them over the
    EP group by all_to_all (dispatch, :705) and brings the experts' outputs back the same
    way (combine, :864); the all-to-all's backward is another all-to-all with the splits
    swapped (megatron/core/tensor_parallel/mappings.py:469-481). The step counts six per
    MoE layer: dispatch and combine in the training forward, their two in the backward,
    and two in the forward that recomputes the old policy's log-probs. The routing
    probabilities' own all-to-all (:718, top-k floats a token) is left out, under 0.1% of
    the hidden states at hidden >= 2048."""
    if ep <= 1 or not model.is_moe:
        return 0.0
    per_copy = model.hidden * dtype_bytes * model.experts_per_token * (ep - 1) / ep
    # two a forward pass besides the update's (`TrainModel.build`'s `forwards`)
    all_to_alls = ALL_TO_ALLS_PER_MOE_LAYER + 2 * (forwards - 1)
    return all_to_alls * moe_layers(model) * per_copy
