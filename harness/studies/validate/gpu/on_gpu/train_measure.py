"""Time Megatron-core training of Qwen3-shaped models with random weights, on the GPU at hand.

Run on a GPU machine from the checkout's root (megatron-core importable, e.g. carried as a
wheel):

    python3 -m harness.studies.validate.gpu.on_gpu.train_measure --out DIR

It writes DIR/train.csv (one row per timed point, appended as it goes) and
DIR/provenance.json (GPU, driver, torch, CUDA and megatron-core versions, the models'
shapes and parameter counts, the matrix-product ceiling, the method). `--quick` runs tiny
shapes anywhere (CPU too, gloo), for checking the script.

Method:
- Models: Megatron-core `GPTModel` over `get_gpt_layer_local_spec` (Megatron's own torch
  modules: no Transformer Engine, no apex), Qwen3's layer (RMSNorm, QK-norm, GQA, RoPE,
  SwiGLU, no biases), bf16 weights, random init. The core attention is swapped for
  `F.scaled_dot_product_attention` (causal, flash): Megatron's local `DotProductAttention`
  materialises every (query, key) score, which no production trainer does. The dense model
  is Qwen3-1.7B whole (28 layers, tied embeddings); the MoE one is Qwen3-30B-A3B's layer
  (128 experts, top-8, expert FFN 768, aux-loss router) with `--moe-layers` layers, so its
  weights and Adam state fit one GPU. Without the `grouped_gemm` extension Megatron's local
  MoE runs its experts one by one (`SequentialMLP`): that is what is timed.
- Parallel state: one process, torch.distributed with world size 1, tensor, pipeline and
  expert parallel 1. Megatron's `DistributedDataParallel` (fp32 gradient buffer) and
  `get_megatron_optimizer` (Adam with fp32 master weights; torch's Adam where apex and TE are
  absent).
- Micro-batch (batch x sequence tokens): `train_fwdbwd` is forward with the labels (Megatron's
  cross entropy), mean loss, backward and the gradient sync, from zeroed gradient buffers;
  `forward` is the same forward without gradients (the old-log-prob pass). `optimizer` is
  one `optimizer.step()` (grads to the fp32 copies, norm, Adam, copy back to bf16).
  Each: warm-up calls, then `repeats` calls timed one by one with CUDA events (host clock
  on a CPU); the row holds the median and the 10th and 90th percentiles.
- Experts' FFN (`experts.py`): Qwen3-30B-A3B's expert shape at several tokens per layer,
  balanced routing, forward as one CUDA graph per point (grouped and sequential) and
  forward-backward eagerly, as the database's `moe` table is keyed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F

from harness.studies.validate.gpu.on_gpu import busy, experts
from harness.studies.validate.gpu.on_gpu.measure import Timer, ceilings, provenance, summary

FIELDS = ["kind", "model", "name", "batch", "seq", "tokens", "ms", "ms_p10", "ms_p90",
          "repeats", "peak_gib", "note"]
MICRO = [(1, 1024), (1, 2048), (1, 4096), (2, 4096), (1, 8192)]  # (sequences, tokens each)
MOE_TOKENS = [16, 64, 256, 1024, 2048, 4096, 8192, 16384]


@dataclass(frozen=True)
class Shape:
    """A Qwen3 decoder's sizes (the HF config's names in comments)."""

    name: str
    layers: int  # num_hidden_layers
    hidden: int  # hidden_size
    heads: int  # num_attention_heads
    kv_heads: int  # num_key_value_heads
    head_dim: int
    ffn: int  # intermediate_size (dense) or moe_intermediate_size (per expert)
    vocab: int
    tied: bool  # tie_word_embeddings
    experts: int = 0  # num_experts; 0 for a dense model
    topk: int = 0  # num_experts_per_tok


# Qwen/Qwen3-1.7B and Qwen/Qwen3-30B-A3B config.json (as aiconfigurator-core ships them).
DENSE = Shape("qwen3-1.7b", 28, 2048, 16, 8, 128, 6144, 151936, True)
MOE = Shape("qwen3-30b-a3b", 48, 2048, 32, 4, 128, 768, 151936, False, 128, 8)


def tiny(s: Shape) -> Shape:
    return replace(s, layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16,
                   ffn=32 if s.experts else 128, vocab=256, experts=min(s.experts, 8),
                   topk=min(s.topk, 2))


def core_attention_class() -> type:
    """A Megatron core-attention module over `F.scaled_dot_product_attention` (causal,
    GQA), with `DotProductAttention`'s constructor and call signature."""
    from megatron.core.transformer.module import MegatronModule

    class SdpaAttention(MegatronModule):
        def __init__(self, config, layer_number, attn_mask_type, attention_type,  # noqa: ANN001
                     attention_dropout=None, softmax_scale=None, cp_comm_type=None,  # noqa: ANN001
                     pg_collection=None) -> None:  # noqa: ANN001
            super().__init__(config=config)
            self.scale = softmax_scale

        def forward(self, query, key, value, attention_mask, attn_mask_type=None,  # noqa: ANN001
                    attention_bias=None, packed_seq_params=None):  # noqa: ANN001, ANN201
            s, b = query.shape[:2]  # Megatron's layout: [sequence, batch, heads, dim]
            q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True,
                                                 scale=self.scale)
            return out.permute(2, 0, 1, 3).reshape(s, b, -1)

    return SdpaAttention


def check_swap(cuda: bool) -> float:
    """Relative difference of a tiny model's logits with the SDPA core attention against
    Megatron's own `DotProductAttention` (same weights): bf16 lands near 1e-2 or under."""
    from megatron.core.transformer.dot_product_attention import DotProductAttention

    s = tiny(DENSE)
    mine = build(s, cuda, 128)[0].module
    theirs = build(s, cuda, 128, DotProductAttention)[0].module
    theirs.load_state_dict(mine.state_dict())
    device = "cuda" if cuda else "cpu"
    x = torch.randint(0, s.vocab, (2, 128), device=device)
    pos = torch.arange(128, device=device)[None].expand(2, -1)
    with torch.no_grad():
        a, b = mine(x, pos, None).float(), theirs(x, pos, None).float()
    return float((a - b).norm() / b.norm())


def start_megatron(cuda: bool) -> None:
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    torch.distributed.init_process_group("nccl" if cuda else "gloo", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)
    if cuda:
        model_parallel_cuda_manual_seed(0)


def build(s: Shape, cuda: bool, max_seq: int, attention: type | None = None
          ) -> tuple[torch.nn.Module, object, int]:
    """The model in Megatron's DDP wrapper and its optimizer; returns the parameter count."""
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.transformer import TransformerConfig

    moe = {}
    if s.experts:
        from megatron.core.transformer.moe import moe_utils

        # megatron-core 0.16.1 names `te_general_gemm` in the router's matmul but binds it
        # only when Transformer Engine imports: without TE the router stops on a NameError.
        # None takes its own torch.mm branch (moe_utils.RouterGatingLinearFunction).
        if not hasattr(moe_utils, "te_general_gemm"):
            moe_utils.te_general_gemm = None
        moe = dict(num_moe_experts=s.experts, moe_router_topk=s.topk, moe_ffn_hidden_size=s.ffn,
                   moe_router_load_balancing_type="aux_loss", moe_aux_loss_coeff=1e-3,
                   moe_grouped_gemm=False,
                   moe_token_dispatcher_type="alltoall" if cuda else "allgather")
    cfg = TransformerConfig(
        num_layers=s.layers, hidden_size=s.hidden, num_attention_heads=s.heads,
        num_query_groups=s.kv_heads, kv_channels=s.head_dim, ffn_hidden_size=s.ffn,
        normalization="RMSNorm", layernorm_epsilon=1e-6, gated_linear_unit=True,
        activation_func=F.silu, qk_layernorm=True, add_bias_linear=False,
        hidden_dropout=0.0, attention_dropout=0.0, bf16=True, params_dtype=torch.bfloat16,
        use_cpu_initialization=not cuda, **moe)
    spec = get_gpt_layer_local_spec(num_experts=s.experts or None, moe_grouped_gemm=False,
                                    qk_layernorm=True, normalization="RMSNorm")
    spec.submodules.self_attention.submodules.core_attention = attention or core_attention_class()
    model = GPTModel(cfg, spec, vocab_size=s.vocab, max_sequence_length=max_seq,
                     position_embedding_type="rope", rotary_base=1_000_000,
                     share_embeddings_and_output_weights=s.tied)
    model = model.cuda() if cuda else model
    count = sum(p.numel() for p in model.parameters())
    if not cuda:  # Megatron's DDP buffers and optimizer need CUDA: plain torch for --quick
        return Plain(model), torch.optim.AdamW(model.parameters(), lr=1e-5), count
    ddp = DistributedDataParallel(cfg, DistributedDataParallelConfig(grad_reduce_in_fp32=True),
                                  model)
    opt = get_megatron_optimizer(OptimizerConfig(optimizer="adam", lr=1e-5, bf16=True,
                                                 params_dtype=torch.bfloat16,
                                                 clip_grad=1.0), [ddp])
    return ddp, opt, count


class Plain(torch.nn.Module):
    """Megatron DDP's calls used here, without it (CPU only, for checking the script)."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, *args: object, **kwargs: object) -> torch.Tensor:
        return self.module(*args, **kwargs)

    def zero_grad_buffer(self) -> None:
        self.module.zero_grad(set_to_none=True)

    def finish_grad_sync(self) -> None:
        pass


ISSUE: list[float] = []  # host ms until each timed call returned (before the sync)


def timed(fn: Callable[[], object], cuda: bool, warm: int, repeats: int) -> list[float]:
    """ms of each of `repeats` calls after `warm` untimed ones (CUDA events, else host).
    Also keeps in ISSUE the host's time to issue each call: near the event time, the host
    (Python, launches) is what bounds the call, not the GPU."""
    for _ in range(warm):
        fn()
    out = []
    ISSUE.clear()
    for _ in range(repeats):
        t0 = time.perf_counter()
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            ISSUE.append((time.perf_counter() - t0) * 1e3)
            end.record()
            torch.cuda.synchronize()
            out.append(start.elapsed_time(end))
        else:
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
            ISSUE.append(out[-1])
    return out


def issue_note() -> str:
    return f"host issue {statistics.median(ISSUE):.1f} ms" if ISSUE else ""


class Writer:
    def __init__(self, path: Path) -> None:
        import csv

        self.file = path.open("w", newline="")
        self.csv = csv.DictWriter(self.file, fieldnames=FIELDS)
        self.csv.writeheader()

    def add(self, **row: object) -> None:
        self.csv.writerow({f: row.get(f, "") for f in FIELDS})
        self.file.flush()
        shown = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()
                 if k in ("kind", "model", "name", "tokens", "ms", "ms_p10", "ms_p90", "note")}
        print(shown, flush=True)


def peak_gib(cuda: bool) -> float | str:
    return round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else ""


def train_step(model: torch.nn.Module, opt: object, tokens: torch.Tensor, pos: torch.Tensor,
               labels: torch.Tensor) -> None:
    """One micro-batch's training pass, from zeroed gradient buffers."""
    model.zero_grad_buffer()
    opt.zero_grad()
    loss = model(tokens, pos, None, labels=labels)  # per-token cross entropy [b, s]
    loss.float().mean().backward()
    model.finish_grad_sync()


def forward_only(model: torch.nn.Module, tokens: torch.Tensor, pos: torch.Tensor,
                 labels: torch.Tensor) -> None:
    with torch.no_grad():
        model(tokens, pos, None, labels=labels)


def train_points(s: Shape, cuda: bool, w: Writer, micro: list[tuple[int, int]],
                 warm: int, repeats: int) -> dict:
    """Forward-backward and forward per micro-batch, then the optimizer step."""
    device = "cuda" if cuda else "cpu"
    model, opt, count = build(s, cuda, max(seq for _, seq in micro))
    model.train()
    for b, seq in micro:
        tokens = torch.randint(0, s.vocab, (b, seq), device=device)
        labels = torch.randint(0, s.vocab, (b, seq), device=device)
        pos = torch.arange(seq, device=device)[None].expand(b, -1)

        step = partial(train_step, model, opt, tokens, pos, labels)
        forward = partial(forward_only, model, tokens, pos, labels)
        note = ""
        try:
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            times = timed(step, cuda, warm, repeats)  # peak read after, not before
            w.add(kind="train_fwdbwd", model=s.name, batch=b, seq=seq, tokens=b * seq,
                  peak_gib=peak_gib(cuda), note=issue_note(), **summary(times))
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            times = timed(forward, cuda, warm, repeats)
            w.add(kind="forward", model=s.name, batch=b, seq=seq, tokens=b * seq,
                  peak_gib=peak_gib(cuda), note=issue_note(), **summary(times))
            if (b, seq) in (micro[0], micro[-1]):  # GPU kernel time inside one step
                ms, kernels = busy.gpu_busy(step)
                w.add(kind="gpu_busy", model=s.name, name="train_fwdbwd", batch=b, seq=seq,
                      tokens=b * seq, ms=ms, repeats=1, note=f"{kernels} kernels")
        except torch.OutOfMemoryError as err:
            note = f"out of memory: {str(err).splitlines()[0][:100]}"
            w.add(kind="train_fwdbwd", model=s.name, batch=b, seq=seq, tokens=b * seq,
                  note=note)
            torch.cuda.empty_cache()
            break
    ok = opt.step()  # after a backward: real gradients in the buffers
    times = timed(opt.step, cuda, warm, repeats)
    w.add(kind="optimizer", model=s.name, name="adam (megatron, fp32 master)",
          note=f"first step returned {ok[0] if isinstance(ok, tuple) else ok}; {issue_note()}",
          peak_gib=peak_gib(cuda), **summary(times))
    del model, opt
    if cuda:
        torch.cuda.empty_cache()
    return {"params": count}


def expert_points(s: Shape, cuda: bool, w: Writer, tokens: list[int], repeats: int) -> str:
    device = "cuda" if cuda else "cpu"
    why = experts.grouped_supported(device)
    timer = Timer(device, repeats)
    for t in tokens:
        for name, fn in experts.points(s.hidden, s.ffn, s.experts, s.topk, t, device).items():
            times = (timed(fn, cuda, 3, repeats) if name.endswith("fwdbwd")
                     else timer.graphed(fn))
            w.add(kind="moe_ffn", model=s.name, name=name, tokens=t,
                  note=f"hidden={s.hidden} inter={s.ffn} experts={s.experts} topk={s.topk} "
                       "balanced", **summary(times))
        if cuda:
            torch.cuda.empty_cache()
    return why


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--quick", action="store_true", help="tiny shapes, any device")
    parser.add_argument("--moe-layers", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warm", type=int, default=5)
    parser.add_argument("--parts", default="dense,moe,experts")
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    start = time.perf_counter()
    dense, moe = DENSE, replace(MOE, layers=args.moe_layers)
    micro = [(1, 64), (2, 64)] if args.quick else MICRO
    if args.quick:
        dense, moe = tiny(dense), tiny(moe)
    repeats = 3 if args.quick else args.repeats
    args.models = f"{dense.name},{moe.name}"
    info = provenance(device, ceilings(Timer(device, repeats), device), args)
    info["method"] = __doc__.split("Method:")[1].strip()
    import megatron.core

    info["megatron_core"] = getattr(megatron.core, "__version__", "unknown")
    info["shapes"] = {}
    info["commit"] = os.environ.get("SCRIPT_COMMIT", "")
    info["host"] = busy.launch_cost(device)
    print(f"{device}: bf16 {info['ceilings']['bf16_tflops']:.0f} TFLOP/s, megatron-core "
          f"{info['megatron_core']}", flush=True)
    writer = Writer(args.out / "train.csv")
    parts = args.parts.split(",")
    if not cuda:  # Megatron moves a few tensors to `current_device()`: the CPU here
        torch.cuda.current_device = lambda: "cpu"  # type: ignore[assignment]
    if "dense" in parts or "moe" in parts:
        start_megatron(cuda)
        if cuda:
            info["check_rel_error"] = {"sdpa_vs_dot_product_attention": check_swap(cuda)}
            print(f"attention swap check: {info['check_rel_error']}", flush=True)
    for part, shape in (("dense", dense), ("moe", moe)):
        if part not in parts:
            continue
        try:
            counts = train_points(shape, cuda, writer, micro, args.warm, repeats)
        except Exception as err:  # noqa: BLE001 - a failed model is recorded, the rest runs
            writer.add(kind="error", model=shape.name, note=repr(err)[:300])
            counts = {"error": repr(err)[:300]}
        info["shapes"][shape.name] = asdict(shape) | counts
        print(f"{shape.name} done ({time.perf_counter() - start:.0f} s)", flush=True)
        (args.out / "provenance.json").write_text(json.dumps(info, indent=1))
    if "experts" in parts:
        why = expert_points(moe, cuda, writer, [16, 64] if args.quick else MOE_TOKENS, repeats)
        info["grouped_mm"] = why or "torch._grouped_mm ran"
    info["wall_s"] = round(time.perf_counter() - start, 1)
    (args.out / "provenance.json").write_text(json.dumps(info, indent=1))
    writer.file.close()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    print(f"done in {info['wall_s']} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
