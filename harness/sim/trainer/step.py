"""A training micro-batch and optimizer step priced from measured kernels and the layout.

`KernelTrainModel` has `perf.TrainModel`'s interface (`micro_time(seq_lens)`,
`optimizer_s`), so `SimTrainer` runs it unchanged. A call to `micro_time` hands it the
sequences of one pool-wide micro-batch; it spreads them over the data-parallel replicas
(longest first, each to the least-loaded replica, as verl's dynamic batch size and
sequence packing balance tokens), packs each replica's share into micro-batches of at
most `micro_tokens` tokens (padded to `pad_to` tokens: GEMM tiles) and charges the
busiest replica. One micro-batch on one GPU costs

    fixed_s                                  per forward-backward (constants.py)
  + scale x (kernels of every pass)          forward, backward (dgrad + wgrad), recompute,
                                             extra forwards; attention from the database's
                                             prefill table, its backward 2.5x
  + TP/SP, CP and EP collectives             NCCL's table, not overlapped
  + FSDP's gathers and gradient reduce       overlapped with the kernels: max(kernels, comm)
  + the pipeline's bubble                    x (v m + p - 1) / (v m)

(`pricer.KernelPricer` computes this from the parts below, its constants and look-ups
taken once: the same floats in fewer microseconds), and the optimizer step (`optimizer_s`)
is Adam at the measured 8.8x its 16 bytes per parameter over HBM, on each GPU's shard,
plus, without FSDP, the data-parallel gradient reduce-scatter and parameter all-gather of
the distributed optimizer, plus `step_fixed_s`: a calibration's fixed cost per step that
does not shrink with GPUs (`speed.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from harness.sim.perf import moe_layers
from harness.sim.presets import Hardware, Model
from harness.sim.trainer import constants, db
from harness.sim.trainer.layout import (
    Layout,
    cp_bytes,
    ep_bytes,
    params_per_gpu_group,
    tp_bytes,
    tp_collectives_per_layer,
)
from harness.sim.trainer.pricer import PAD_TO, KernelPricer
from harness.sim.trainer.shapes import Gemm, head_gemm, layer_gemms


@dataclass(frozen=True)
class Passes:
    """What a micro-batch runs: the update's forward and backward, `forwards` more
    forward-only passes (old log-probs, a reference), full recompute or not, and whether
    the base weights get gradients (False: LoRA, only the input's gradient flows)."""

    forwards: int = 1
    recompute: bool = False
    weight_grads: bool = True


@dataclass(frozen=True)
class KernelTrainModel:
    """A trainer pool's micro-batch and optimizer times from the kernel database."""

    gpu: str
    hw: Hardware
    model: Model
    layout: Layout
    framework: str = "fsdp"
    precision: str = "bf16"
    passes: Passes = Passes()
    micro_tokens: int = 16384  # per data-parallel replica
    fitted: tuple[float, float, float] | None = None  # (fixed_s, scale, forward_fixed_s)
    scale: float | None = None  # a calibration's fitted scale in place of the framework's
    step_fixed_s: float = 0.0  # per optimizer step, not shrinking with GPUs (a calibration's)
    _cache: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    # -- the interface SimTrainer uses ---------------------------------------
    @property
    def optimizer_s(self) -> float:
        """Seconds of one optimizer step (`_optimizer_s`), a Python float (the trace
        encodes no numpy float), worked out once: a run steps hundreds of times."""
        found = self._cache.get("optimizer_s")
        if found is None:
            found = self._cache["optimizer_s"] = float(self._optimizer_s())
        return found

    def _optimizer_s(self) -> float:
        """Adam over each GPU's shard at the measured ratio to its bytes, plus Megatron's
        data-parallel reduce-scatter of gradients and all-gather of parameters (FSDP
        reduces per micro-batch instead); nothing for LoRA's base weights."""
        if not self.passes.weight_grads:
            return self.step_fixed_s
        params = self.model.params_b * 1e9 / self.layout.gpus
        adam = (constants.ADAM_OVER_BYTES * constants.ADAM_BYTES_PER_PARAM * params
                / (self.hw.hbm_bandwidth_gbs * 1e9))
        if self.layout.fsdp:
            return adam + self.step_fixed_s
        dp = self.layout.dp
        grads = params_per_gpu_group(self.model, self.layout) * 2.0  # bf16 buffers
        comm = (db.collective_s(self.gpu, "reduce_scatter", grads, dp, self.link)
                + db.collective_s(self.gpu, "all_gather", grads, dp, self.link))
        return adam + comm + self.step_fixed_s

    def micro_time(self, seq_lens: list[int]) -> float:
        """Seconds for the pool to train these sequences (see the module's docstring;
        `pricer.KernelPricer` computes it)."""
        return self.pricer().micro_time(seq_lens)

    def pricer(self) -> KernelPricer:
        """This trainer's micro-batch pricer, made once (its constants and look-ups)."""
        found = self._cache.get("pricer")
        if found is None:
            found = self._cache["pricer"] = KernelPricer(self)
        return found

    def on_gpus(self, gpus: int) -> KernelTrainModel | None:
        """This trainer on `gpus` of its GPUs (RollPacker's stream trainer trains on the
        GPUs the engine has released): the same layout with fewer data-parallel
        replicas, or None where TP x PP x CP does not divide `gpus`. Kept per count."""
        key = ("gpus", gpus)
        if key not in self._cache:
            layout = replace(self.layout, gpus=gpus)
            self._cache[key] = (None if layout.check() else
                                replace(self, layout=layout, _cache={}))
        return self._cache[key]

    # -- the parts ----------------------------------------------------------------
    @property
    def link(self) -> float:
        return self.hw.link_bandwidth_gbs

    @property
    def constants(self) -> dict[str, float]:
        """The framework's fitted constants (or those being fitted: `fitted`), with a
        calibration's `scale` in place of the framework's."""
        if self.fitted is not None:
            return dict(zip(("fixed_s", "scale", "forward_fixed_s"), self.fitted, strict=True))
        own = constants.FRAMEWORKS.get(self.framework, constants.FRAMEWORKS["fsdp"])
        return own if self.scale is None else {**own, "scale": self.scale}

    def forward_time(self, lens: list[int]) -> float:
        """One forward-only pass of these sequences as one micro-batch on one GPU (old
        log-probs, a reference model): its fixed cost and its kernels."""
        tokens = -(-sum(lens) // PAD_TO) * PAD_TO
        attn = sum(self.attention_forward_s(n) for n in lens)
        c = self.constants
        return c["forward_fixed_s"] + c["scale"] * (self.dense_forward_s(tokens) + attn)

    def dense_forward_s(self, tokens: int) -> float:
        """Every layer's dense products plus the experts (MoE layers) and the LM head."""
        m, lay = self.model, self.layout
        per_layer = sum(self.gemm(g) for g in layer_gemms(m, tokens, lay.tp))
        total = per_layer * m.layers + self.gemm(head_gemm(m, tokens, lay.tp))
        if m.is_moe:
            total += moe_layers(m) * db.moe_forward_s(
                self.gpu, tokens, m.hidden, m.expert_intermediate // lay.tp, m.experts,
                m.experts_per_token, lay.ep)
        return total

    def dense_backward_s(self, tokens: int) -> float:
        """dgrad for every product, wgrad too unless LoRA; the experts' backward as two
        forwards' worth (one without weight gradients)."""
        m, lay = self.model, self.layout
        gemms = [*layer_gemms(m, tokens, lay.tp)]
        per_layer = sum(self.gemm(g.dgrad()) for g in gemms)
        head = head_gemm(m, tokens, lay.tp)
        total = per_layer * m.layers + self.gemm(head.dgrad())
        if self.passes.weight_grads:
            total += sum(self.gemm(g.wgrad()) for g in gemms) * m.layers
            total += self.gemm(head.wgrad())
        if m.is_moe:
            experts = moe_layers(m) * db.moe_forward_s(
                self.gpu, tokens, m.hidden, m.expert_intermediate // lay.tp, m.experts,
                m.experts_per_token, lay.ep)
            total += experts * (2 if self.passes.weight_grads else 1)
        return total

    def attention_forward_s(self, n: int) -> float:
        """One sequence's attention forward over every layer (heads split by TP)."""
        m, tp = self.model, self.layout.tp
        return m.layers * db.attention_forward_s(
            self.gpu, n, max(m.heads // tp, 1), max(m.kv_heads // tp, 1), m.head_dim)

    def attention_forward_many(self, lengths: list[int]) -> list[float]:
        """`attention_forward_s` of each of `lengths` at once (the same floats)."""
        m, tp = self.model, self.layout.tp
        return [m.layers * t for t in db.attention_forward_many(
            self.gpu, lengths, max(m.heads // tp, 1), max(m.kv_heads // tp, 1), m.head_dim)]

    def layer_comm_s(self, tokens: int) -> float:
        """TP/SP, CP and EP collectives of one micro-batch, forward and backward, and
        again for each recomputed or extra forward (half the per-layer count each)."""
        m, lay, p = self.model, self.layout, self.passes
        passes = 1.0 + 0.5 * (p.forwards + (1 if p.recompute else 0))
        total = 0.0
        if lay.tp > 1:
            per = sum(count * db.collective_s(self.gpu, op, tp_bytes(m, tokens), lay.tp,
                                              self.link)
                      for op, count in tp_collectives_per_layer(lay.sequence_parallel).items())
            total += per * m.layers
        if lay.cp > 1:
            kv = cp_bytes(m, tokens * lay.cp, lay.tp)
            total += m.layers * (db.collective_s(self.gpu, "all_gather", kv, lay.cp, self.link)
                                 + db.collective_s(self.gpu, "reduce_scatter", kv, lay.cp,
                                                   self.link))
        if lay.ep > 1 and m.is_moe:
            a2a = db.collective_s(self.gpu, "alltoall", ep_bytes(m, tokens), lay.ep, self.link)
            total += 4 * moe_layers(m) * a2a  # dispatch and combine, forward and backward
        return total * passes

    def fsdp_comm_s(self) -> float:
        """FSDP per micro-batch: the parameters all-gathered for the forward and again for
        the backward (and for each extra forward), BF16, and the gradients
        reduce-scattered in FP32 (verl's and prime-rl's mixed-precision reduce)."""
        lay = self.layout
        if not lay.fsdp or lay.dp <= 1:
            return 0.0
        params = params_per_gpu_group(self.model, lay)
        gathers = 2 + self.passes.forwards
        ag = db.collective_s(self.gpu, "all_gather", params * 2.0, lay.dp, self.link)
        rs = (db.collective_s(self.gpu, "reduce_scatter", params * 4.0, lay.dp, self.link)
              if self.passes.weight_grads else 0.0)
        return gathers * ag + rs

    def gemm(self, g: Gemm) -> float:
        return db.gemm_s(self.gpu, g.m, g.n, g.k, self.precision)
