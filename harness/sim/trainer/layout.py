"""How a trainer spreads over its GPUs, and what that layout costs besides the kernels.

`Layout` names the parallel sizes (TP, PP with virtual stages, EP, CP, data parallel as
what is left), whether data parallelism shards parameters (FSDP / ZeRO-3, gathering them
for each pass) or keeps them whole (Megatron's DDP with its distributed optimizer), and
whether activations are recomputed in the backward. The functions here give the bytes
and counts each collective moves; `harness.sim.trainer.step` prices them from NCCL's table.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.sim.presets import Model


@dataclass(frozen=True)
class Layout:
    """A trainer's parallel layout over `gpus` GPUs."""

    gpus: int
    tp: int = 1
    pp: int = 1
    vpp: int = 1  # virtual pipeline stages per GPU (Megatron's interleaved schedule)
    ep: int = 1
    cp: int = 1
    fsdp: bool = True  # parameters sharded over data parallel and gathered each pass
    sequence_parallel: bool = True  # TP's activations split by tokens between layers
    recompute: bool = False  # activations recomputed in the backward (full checkpointing)
    pipeline_micro_batches: int = 8  # micro-batches a pipeline runs per step (PP > 1)

    @property
    def dp(self) -> int:
        """Data-parallel replicas: what TP, PP and CP leave (EP folds into them)."""
        return max(1, self.gpus // (self.tp * self.pp * self.cp))

    def check(self) -> str | None:
        """Why the layout cannot be, or None."""
        if min(self.gpus, self.tp, self.pp, self.vpp, self.ep, self.cp) < 1:
            return "every size must be >= 1"
        if self.gpus % (self.tp * self.pp * self.cp):
            return (f"tp x pp x cp = {self.tp * self.pp * self.cp} must divide the "
                    f"trainer's {self.gpus} GPUs")
        if self.gpus % self.ep:
            return f"ep = {self.ep} must divide the trainer's {self.gpus} GPUs"
        return None


def bubble(pp: int, micro_batches: int, vpp: int = 1) -> float:
    """The share of a pipeline's step spent idle: (p - 1) / (v m + p - 1) for p stages,
    m micro-batches and v virtual stages per GPU (Narayanan et al., "Efficient Large-Scale
    Language Model Training on GPU Clusters Using Megatron-LM", SC'21, sections 2.2.1 and
    2.2.2: the bubble is (p - 1) / m of the ideal time, and (p - 1) / (v m) interleaved)."""
    if pp <= 1:
        return 0.0
    return (pp - 1) / (vpp * micro_batches + pp - 1)


def tp_bytes(model: Model, tokens: int) -> float:
    """One TP collective's buffer: a layer's activations, tokens x hidden in BF16."""
    return tokens * model.hidden * 2.0


def tp_collectives_per_layer(sequence_parallel: bool) -> dict[str, int]:
    """Per layer, forward and backward together: with sequence parallelism an all-gather
    before and a reduce-scatter after attention and the MLP (2 + 2 forward, the same
    again backward); without, one all-reduce after each (2 forward, 2 backward)
    (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
    Models", 2022, section 4.2.2 and figure 5)."""
    if sequence_parallel:
        return {"all_gather": 4, "reduce_scatter": 4}
    return {"all_reduce": 4}


def cp_bytes(model: Model, tokens: int, tp: int) -> float:
    """Context parallelism's per-layer exchange: every rank's keys and values for the
    whole sequence (all-gathered forward, their gradients reduce-scattered backward),
    tokens x 2 x kv heads / TP x head dim in BF16."""
    return tokens * 2.0 * max(model.kv_heads // tp, 1) * model.head_dim * 2.0


def ep_bytes(model: Model, tokens: int) -> float:
    """One all-to-all's buffer under EP: each token's hidden state once per routed expert
    (Megatron-core's dispatcher permutes a token into top-k rows, see
    `harness.sim.perf.all_to_all_bytes_per_token`), BF16."""
    return tokens * model.hidden * 2.0 * model.experts_per_token


def params_per_gpu_group(model: Model, layout: Layout) -> float:
    """Parameters one data-parallel group holds between them (a TP x PP slice)."""
    return model.params_b * 1e9 / (layout.tp * layout.pp)
