"""A decode step without CUDA graphs (`sim.engine_eager`), from the project's own timings.

Why: frameworks have served vLLM with `enforce_eager` (verl's rollout until ff6978c, SkyRL
from 5157c5f to 059e6d9: harness/sim/frameworks.py), and the measured-kernel database
times every kernel inside a graph (its one eagerly timed table, vLLM's block-FP8 GEMM, is
priced from a graph-timed one instead: estimator.EAGER_GEMMS). Run eagerly, a step's
kernels are issued one torch call at a time by the host, and the GPU waits between
kernels that a graph would have launched back to back.

What is measured: `harness/studies/validate/gpu/on_gpu/measure.py` timed the project's
Qwen3 decoder (`on_gpu/decoder.py`) both ways at every (batch, context) point, on H100 and
H200 (measurements/<gpu>/run1, run2: the `decode` rows' `ms`, one CUDA graph replayed, and
`eager_ms`, the host clock around the same step called eagerly and synchronised). One
layer of that decoder makes LAYER_CALLS torch calls, LAYER_KERNELS of which launch a
kernel (counted with a TorchFunctionMode on its decode step: tests/test_engine_eager.py).

The model: an eager step takes the longer of (a) the graph-timed kernels plus a gap per
kernel launched and (b) the host issuing every call, plus what the framework spends
around the forward (its fitted per-step term, kernels/overhead.py, charged either way):

    step = framework(b) + max(kernels(b, ctx) + L x kernels_per_layer x GAP,
                              L x calls_per_layer x HOST)

L is the model's layers; at TP > 1 each layer adds its two all-reduces, one kernel each
(its graph-timed time is in the kernels' step) and one call each, whose host time is the
database's own eager measurement where it has one (`allreduce_host_us`: aiconfigurator's
collectors time the framework's custom all-reduce with and without a graph; the eager rows
are flat at about 20 us a call up to 1 MB on H100, H200 and B200 with vLLM 0.24.0, 30 us
with SGLang 0.5.14, where the graph's kernel takes 4-12 us: the host issuing it), else HOST.
HOST and GAP are fitted on FIT_ROWS (Qwen3-1.7B on H100, both runs) and
checked on the rest (Qwen3-8B on H100, both models on H200): held-out median |error| 1.3%
to 5.9% per (GPU, run, model), against 24-61% for the graph-timed step alone
(tests/test_engine_eager.py). HOST comes out at 9.2 us per call, what train_measure.py
timed for one trivial torch op on the same H100's host (measurements/h100-sxm/trainer/run3:
`torch_op_us` 9.22), and GAP at 1.9 us per kernel.

What it does not know, so refuses (`refusal`): a MoE or latent-attention layer, FP8 or
FP4 weights and an FP8 cache (their layers make calls this decoder does not: a router, a
quantisation per product); the measured layer is plain torch's, not vLLM's own (fewer,
fused custom ops behind more Python), so a framework's eager layer is priced as this one,
and a dense layer without Qwen3's q/k RMSNorm (4 of the 41 calls) is priced at 41 too.
Prefill is priced as with graphs: vLLM captured decode batches only, never prefill
(vllm-project/vllm@587909ce:vllm/worker/model_runner.py, `ModelRunner.capture_model`).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.sim.perf import StepJump

LAYER_CALLS = 41  # torch calls one decoder layer makes (attribute reads not counted)
LAYER_KERNELS = 25  # of them, the calls that launch a kernel (views and slices do not)
TP_CALLS = 2  # per layer at TP > 1: the attention's and the MLP's all-reduce
HOST_US = 9.21  # us of host time per torch call (fit: FIT_ROWS)
GAP_US = 1.90  # us the GPU idles per kernel launched without a graph (fit: FIT_ROWS)
LAYERS = {"qwen3-1.7b": 28, "qwen3-8b": 36}  # the measured models' layers (presets)
FIT_ROWS = (("h100-sxm", "qwen3-1.7b"),)  # (GPU folder, model) the constants are fitted on
MEASUREMENTS = Path(__file__).parents[3] / "measurements"


@dataclass(frozen=True)
class Point:
    """One measured decode step: ms in a graph and eagerly."""

    gpu: str
    run: str
    model: str
    batch: int
    context: int
    graph_ms: float
    eager_ms: float


def load_points(root: Path = MEASUREMENTS) -> list[Point]:
    """Every decode row with both times in `root`/<gpu>/<run>/measure.csv."""
    out = []
    for path in sorted(root.glob("*/run*/measure.csv")):
        with path.open(encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                if r["kind"] == "decode" and r["ms"] and r["eager_ms"]:
                    out.append(Point(path.parts[-3], path.parts[-2], r["model"],
                                     int(r["batch"]), int(r["context"]), float(r["ms"]),
                                     float(r["eager_ms"])))
    return out


def predict_ms(graph_ms: float, layers: int, host_us: float = HOST_US,
               gap_us: float = GAP_US, tp: int = 1) -> float:
    """An eager forward's ms from its graph-timed ms (no framework term)."""
    calls, kernels = per_layer(tp)
    return max(graph_ms + layers * kernels * gap_us / 1e3, layers * calls * host_us / 1e3)


def allreduce_host_us(system: str, backend: str, version: str, tp: int) -> float | None:
    """The host's time per all-reduce call of `backend` `version` at `tp` GPUs on the
    database's `system`: its eager custom all-reduce at the smallest message it timed (the
    call rate when the host binds; None: no eager row for this TP)."""
    import pyarrow.parquet as pq

    from harness.sim.kernels.estimator import _package_dir, quiet

    with quiet():
        root = _package_dir() / "systems" / "data" / system / "comm" / backend / version
    path = root / "custom_allreduce_perf.parquet"
    if tp < 2 or not path.exists():
        return None
    rows = pq.read_table(path).to_pylist()
    eager = [r for r in rows if r["num_gpus"] == tp
             and "eager" in str(r.get("backend") or r.get("kernel_source"))]
    if not eager:
        return None
    least = min(r["message_size"] for r in eager)
    return 1e3 * min(r["latency"] for r in eager if r["message_size"] == least)


def per_layer(tp: int) -> tuple[int, int]:
    """(torch calls, kernels) one layer issues at this TP."""
    extra = TP_CALLS if tp > 1 else 0
    return LAYER_CALLS + extra, LAYER_KERNELS + extra


def fit(points: Iterable[Point]) -> tuple[float, float]:
    """(HOST_US, GAP_US) that minimise the summed |log(predicted / measured)| over
    `points` (robust to the eager medians' occasional slow repeat), on a 0.01 us grid."""
    import numpy as np

    pts = list(points)
    layers = np.array([LAYERS[p.model] for p in pts], dtype=float)
    graph = np.array([p.graph_ms for p in pts])
    eager = np.log([p.eager_ms for p in pts])
    gaps = np.arange(0.0, 5.0, 0.01)
    gpu_side = graph[None, :] + layers[None, :] * LAYER_KERNELS * gaps[:, None] / 1e3
    best = (math.inf, 0.0, 0.0)
    for host in np.arange(5.0, 15.0, 0.01):
        pred = np.maximum(gpu_side, layers * LAYER_CALLS * host / 1e3)
        loss = np.abs(np.log(pred) - eager).sum(axis=1)
        i = int(loss.argmin())
        if loss[i] < best[0]:
            best = (float(loss[i]), round(float(host), 2), round(float(gaps[i]), 2))
    return best[1], best[2]


def is_fitted(p: Point) -> bool:
    return (p.gpu, p.model) in FIT_ROWS


def refusal(model: object, precision: str, kv_dtype: str, measured: bool = False
            ) -> str | None:
    """Why an eager step of this engine is not priced (None: it is), in one line;
    `measured`: the calibration holds a live engine's own [decode] table."""
    name = getattr(model, "name", "the model")
    if measured:
        return ("sim.engine_eager: the calibration's measured [decode] table already times "
                "a live engine's steps as it ran; leave sim.engine_eager off")
    if getattr(model, "is_moe", False):
        return (f"sim.engine_eager: {name} is a MoE; eager steps are measured for dense "
                f"decoder layers only (docs/simulator.md, eager engines)")
    if getattr(model, "kv_width", 0):
        return (f"sim.engine_eager: {name} caches a latent (MLA); eager steps are measured "
                f"for grouped-query attention layers only (docs/simulator.md, eager engines)")
    if precision != "bf16" or kv_dtype != "bf16":
        return (f"sim.engine_eager: eager steps are measured with BF16 weights and cache only "
                f"(got sim.rollout_precision={precision}, sim.rollout_kv_dtype={kv_dtype})")
    return None


@dataclass(frozen=True)
class EagerStep(StepJump):
    """A decode step without CUDA graphs over a graph-timed step model (`kernels`, with no
    framework term in it): per step, framework(b) + max(kernels + gaps_s, host_s)."""

    kernels: StepJump
    host_s: float  # per step: the host issuing every layer's calls
    gaps_s: float  # per step: the GPU's idle time between kernels, graph-less
    framework_fixed_s: float = 0.0  # per step, around the forward
    framework_per_seq_s: float = 0.0  # per running sequence, up to framework_cap of them
    framework_cap: int = 0  # 0: no cap
    prefill_per_token_s: float = 0.0
    prefill_per_token2_s: float = 0.0
    prefill_fixed_s: float = 0.0
    admit_per_request_s: float = 0.0
    prefill_lanes: int = 1
    small_batch: int = 0
    small_batch_scale: float = 1.0

    @classmethod
    def over(cls, kernels: StepJump, layers: int, tp: int, framework_fixed_s: float = 0.0,
             framework_per_seq_s: float = 0.0, framework_cap: int = 0,
             allreduce_us: float | None = None) -> EagerStep:
        """The eager step of an engine of `layers` layers at `tp` over `kernels`, its
        prefill as the kernels price it; `allreduce_us`: the host's time per all-reduce
        call where measured (else HOST_US, as any call)."""
        calls, launched = per_layer(tp)
        host_us = calls * HOST_US
        if tp > 1 and allreduce_us is not None:
            host_us += TP_CALLS * (allreduce_us - HOST_US)
        return cls(kernels, layers * host_us * 1e-6, layers * launched * GAP_US * 1e-6,
                   framework_fixed_s, framework_per_seq_s, framework_cap,
                   kernels.prefill_per_token_s, kernels.prefill_per_token2_s,
                   kernels.prefill_fixed_s, kernels.admit_per_request_s,
                   kernels.prefill_lanes)

    def framework_s(self, b: int) -> float:
        seqs = min(b, self.framework_cap) if self.framework_cap else b
        return self.framework_fixed_s + self.framework_per_seq_s * seqs

    def steps_time(self, n: int, b: int, ctx: int) -> float:
        """n steps: the first j host-bound (the kernels' step grows with the context, so
        those come first), the rest the kernels' time plus the gaps."""
        if n <= 0:
            return 0.0
        k = self.kernels
        lo, hi = 0, n  # j: the first step whose kernels and gaps outlast the host
        while lo < hi:
            mid = (lo + hi) // 2
            if k.steps_time(1, b, ctx + mid * b) + self.gaps_s >= self.host_s:
                hi = mid
            else:
                lo = mid + 1
        j = lo
        t = (j * self.host_s + k.steps_time(n, b, ctx) - k.steps_time(j, b, ctx)
             + (n - j) * self.gaps_s + n * self.framework_s(b))
        return self.small_batch_scale * t if b <= self.small_batch else t
