"""Time GEMM shapes, decode steps and prefills on the GPU at hand, with torch alone.

Run on a GPU machine from the checkout's root:

    python3 -m harness.studies.validate.gpu.on_gpu.measure --out DIR

It writes DIR/measure.csv (one row per timed point, appended as it goes, so a run cut short
keeps what it finished) and DIR/provenance.json (the GPU, driver, torch and CUDA versions,
the ceilings measured first, the method). `--quick` runs a tiny grid anywhere (CPU too), for
the tests.

Method (the lent machine's own: warm up, time with device events, capture a graph of many
small launches, median of repeats, random data, never zeros):
- GEMM: `F.linear` of an (m, k) activation and an (n, k) weight, as the engines call it.
  One CUDA graph holds `reps` products rotating over enough weight copies to exceed four
  times the L2 cache, so a repeat reads its weight from memory, as a decode step does; the
  time of one product is a replay's time over `reps`.
- Decode step: the whole step of `decoder.Decoder` captured as one CUDA graph over a KV
  cache of random values (batch x context tokens), timed per replay; also the same step
  eagerly (host clock around a synchronised call), to show what graphs save.
- Prefill: one prompt of `context` tokens, captured likewise.
- Attention alone (kind `attention`): the decode step's attention over every layer's cache,
  and a prefill's causal attention once per layer, each one graph; the time is all layers'.
Each point: median and the 10th and 90th percentiles over the timed repeats.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F

from harness.sim.presets import Model, load_model
from harness.studies.validate.gpu.on_gpu import decoder
from harness.studies.validate.gpu.on_gpu.decoder import Decoder, decode_attention

FIELDS = ["kind", "model", "name", "m", "n", "k", "batch", "context", "ms", "ms_p10",
          "ms_p90", "repeats", "eager_ms", "note"]
GEMM_M = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
DECODE_BATCH = [1, 2, 4, 8, 16, 32, 64, 128, 256]
CONTEXTS = [512, 2048, 8192]
PREFILL = [512, 1024, 2048, 4096, 8192]
APPENDIX_H = [16, 32, 64, 128, 192, 256, 384, 512, 1024, 2048, 4096]  # (4096 x h)(h x 16384)


def dims_of(preset: str) -> Model:
    """A model preset, named by its preset key (what the CSV's `model` column holds)."""
    return dataclasses.replace(load_model(preset), name=preset)


def tiny(model: Model) -> Model:
    """The same kind of model at a tiny size, for `--quick`."""
    return dataclasses.replace(model, layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16,
                               intermediate=128, vocab=256)


class Timer:
    """Times a callable on `device`: CUDA events per graph replay, else the host clock."""

    def __init__(self, device: str, repeats: int) -> None:
        self.device, self.repeats = device, repeats
        self.cuda = device.startswith("cuda")

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def eager(self, fn: Callable[[], object], repeats: int = 5) -> list[float]:
        fn()
        self.sync()
        out = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            self.sync()
            out.append((time.perf_counter() - start) * 1e3)
        return out

    def graphed(self, fn: Callable[[], object]) -> list[float]:
        """ms per call of `fn` over `repeats` replays of its captured graph (eager off-GPU)."""
        if not self.cuda:
            return self.eager(fn, self.repeats)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        for _ in range(3):
            graph.replay()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(self.repeats)]
        for start, end in events:
            start.record()
            graph.replay()
            end.record()
        torch.cuda.synchronize()
        out = [start.elapsed_time(end) for start, end in events]
        del graph
        return out


def summary(times: list[float], per: int = 1) -> dict[str, float | int]:
    ordered = sorted(t / per for t in times)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"ms": statistics.median(ordered), "ms_p10": pick(0.1), "ms_p90": pick(0.9),
            "repeats": len(ordered)}


class Writer:
    """Appends rows to measure.csv as they are timed and echoes one short line each."""

    def __init__(self, out: Path) -> None:
        self.path = out / "measure.csv"
        self.file = self.path.open("w", newline="")
        self.csv = csv.DictWriter(self.file, fieldnames=FIELDS)
        self.csv.writeheader()
        self.rows: list[dict] = []

    def add(self, **row: object) -> None:
        full = {f: row.get(f, "") for f in FIELDS}
        self.csv.writerow(full)
        self.file.flush()
        self.rows.append(full)


def ceilings(timer: Timer, device: str) -> dict[str, float]:
    """Copy bandwidth (bytes read + written) and a large bf16 product's rate, as measured."""
    n = 1 << 30 if timer.cuda else 1 << 20
    src = torch.randn(n, device=device, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    copy_ms = statistics.median(timer.graphed(lambda: dst.copy_(src)))
    size = 8192 if timer.cuda else 256
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    mm_ms = statistics.median(timer.graphed(lambda: a @ b))
    return {"copy_tb_s": 2 * n * 2 / (copy_ms * 1e-3) / 1e12,
            "bf16_tflops": 2 * size ** 3 / (mm_ms * 1e-3) / 1e12}


def check_attention(device: str) -> dict[str, float]:
    """Relative error of the decode and prefill attention against the plain form (K and V
    repeated per query head, float64 on the CPU): bf16 lands near 1e-2 or under."""
    torch.manual_seed(1)
    b, heads, kv, c, d = 3, 8, 2, 300, 64
    q = torch.randn(b, heads, d, device=device, dtype=torch.bfloat16)
    k, v = (torch.randn(b, kv, c, d, device=device, dtype=torch.bfloat16) for _ in range(2))
    got = decode_attention(q, k, v).double().cpu()
    rep = lambda t: t.double().cpu().repeat_interleave(heads // kv, dim=1)  # noqa: E731
    ref = F.scaled_dot_product_attention(q.double().cpu()[:, :, None], rep(k), rep(v))[:, :, 0]
    qp = torch.randn(1, heads, c, d, device=device, dtype=torch.bfloat16)
    got_p = F.scaled_dot_product_attention(qp, k[:1], v[:1], is_causal=True,
                                           enable_gqa=True).double().cpu()
    ref_p = F.scaled_dot_product_attention(qp.double().cpu(), rep(k[:1]), rep(v[:1]),
                                           is_causal=True)
    rel = lambda a, r: float((a - r).norm() / r.norm())  # noqa: E731
    return {"decode_attention": rel(got, ref), "prefill_attention": rel(got_p, ref_p)}


def time_gemm(timer: Timer, device: str, m: int, k: int, n: int, l2_bytes: int
              ) -> dict[str, float | int]:
    weight_bytes = n * k * 2
    copies = max(1, min(16, math.ceil(4 * l2_bytes / weight_bytes)))
    weights = [torch.randn(n, k, device=device, dtype=torch.bfloat16) for _ in range(copies)]
    x = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    est = statistics.median(timer.eager(lambda: F.linear(x, weights[0]), 3))
    reps = max(1, min(48, round(2.0 / max(est, 1e-3))))
    reps = max(copies, reps - reps % copies) if reps >= copies else reps

    def run() -> None:
        for i in range(reps):
            F.linear(x, weights[i % copies])

    return {**summary(timer.graphed(run), per=reps), "note": f"reps={reps} copies={copies}"}


def gemms(timer: Timer, dims: Model, device: str, writer: Writer, ms: list[int],
          l2_bytes: int) -> None:
    for name, (k, n) in decoder.gemms(dims).items():
        for m in ms:
            if name == "lm_head" and m > 256:
                continue  # the head runs on one token per sequence: decode batches only
            stats = time_gemm(timer, device, m, k, n, l2_bytes)
            writer.add(kind="gemm", model=dims.name, name=name, m=m, n=n, k=k, **stats)


def all_layers(op: Callable[..., object], args: list[tuple]) -> None:
    """`op` once per layer's arguments: one layer's kernel times the model's layers."""
    for each in args:
        op(*each)


def causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def decode_points(timer: Timer, dims: Model, device: str, writer: Writer,
                  batches: list[int], contexts: list[int], cap_tokens: int,
                  model: Decoder) -> None:
    per_layer = 2 * dims.kv_heads * dims.head_dim
    most = max(b * c for b in batches for c in contexts if b * c <= cap_tokens)
    flat = torch.randn(dims.layers * most * per_layer, device=device, dtype=torch.bfloat16)
    for c in contexts:
        for b in batches:
            if b * c > cap_tokens:
                writer.add(kind="decode", model=dims.name, batch=b, context=c,
                           note=f"skipped: {b * c} cache tokens over the cap {cap_tokens}")
                continue
            size = b * dims.kv_heads * c * dims.head_dim
            views = flat[: 2 * dims.layers * size].view(dims.layers, 2, b, dims.kv_heads, c,
                                                        dims.head_dim)
            cache = [(views[i, 0], views[i, 1]) for i in range(dims.layers)]
            tokens = torch.randint(0, dims.vocab, (b,), device=device)
            step = partial(model.decode, tokens, c - 1, cache)
            eager = statistics.median(timer.eager(step))
            writer.add(kind="decode", model=dims.name, batch=b, context=c,
                       eager_ms=round(eager, 4), **summary(timer.graphed(step)))
            q = torch.randn(b, dims.heads, dims.head_dim, device=device, dtype=torch.bfloat16)
            every = partial(all_layers, decode_attention, [(q, k, v) for k, v in cache])
            writer.add(kind="attention", model=dims.name, name="decode", batch=b, context=c,
                       note="all layers", **summary(timer.graphed(every)))
    del flat


def compiled_points(timer: Timer, dims: Model, device: str, writer: Writer,
                    batches: list[int], context: int, model: Decoder) -> None:
    """Decode steps with each layer compiled (fused elementwise kernels), in one graph."""
    model.compile_layers()
    per_layer = 2 * dims.kv_heads * dims.head_dim
    flat = torch.randn(dims.layers * max(batches) * context * per_layer, device=device,
                       dtype=torch.bfloat16)
    for b in batches:
        views = flat[: dims.layers * b * context * per_layer].view(
            dims.layers, 2, b, dims.kv_heads, context, dims.head_dim)
        cache = [(views[i, 0], views[i, 1]) for i in range(dims.layers)]
        tokens = torch.randint(0, dims.vocab, (b,), device=device)
        start = time.perf_counter()
        step = partial(model.decode, tokens, context - 1, cache)
        step()
        compile_s = time.perf_counter() - start
        writer.add(kind="decode_compiled", model=dims.name, batch=b, context=context,
                   note=f"first call (compile) {compile_s:.0f} s", **summary(timer.graphed(step)))
    model.layer_step = model.decode_layer
    del flat


def prefill_points(timer: Timer, dims: Model, device: str, writer: Writer,
                   prompts: list[int], model: Decoder) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    fast = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
            SDPBackend.CUDNN_ATTENTION]
    for c in prompts:
        tokens = torch.randint(0, dims.vocab, (c,), device=device)
        note = "attention: flash/efficient/cudnn"
        try:
            with sdpa_kernel(fast if timer.cuda else [SDPBackend.MATH]):
                stats = summary(timer.graphed(partial(model.prefill, tokens)))
        except RuntimeError as err:
            note = f"attention: any backend ({str(err).splitlines()[0][:80]})"
            stats = summary(timer.graphed(partial(model.prefill, tokens)))
        writer.add(kind="prefill", model=dims.name, batch=1, context=c, note=note, **stats)
        sets = [tuple(torch.randn(1, h, c, dims.head_dim, device=device, dtype=torch.bfloat16)
                      for h in (dims.heads, dims.kv_heads, dims.kv_heads)) for _ in range(4)]
        every = partial(all_layers, causal, [sets[i % 4] for i in range(dims.layers)])
        with sdpa_kernel(fast if timer.cuda else [SDPBackend.MATH]):
            writer.add(kind="attention", model=dims.name, name="prefill", batch=1, context=c,
                       note="all layers", **summary(timer.graphed(every)))


def full_grid(args: argparse.Namespace, timer: Timer, device: str, writer: Writer,
              start: float) -> None:
    """Every GEMM shape, decode step, prefill and attention of the grid."""
    l2 = (torch.cuda.get_device_properties(0).L2_cache_size if timer.cuda else 1 << 20)
    quick = args.quick
    for h in ([16, 64] if quick else APPENDIX_H):
        m, n = (64, 128) if quick else (4096, 16384)
        writer.add(kind="gemm", model="appendix_a", name="appendix_a", m=m, n=n, k=h,
                   **time_gemm(timer, device, m, h, n, l2))
    print(f"appendix A shapes done ({time.perf_counter() - start:.0f} s)", flush=True)
    for preset in args.models.split(","):
        dims = dims_of(preset)
        if quick:  # same shape ratios, a tiny size
            dims = tiny(dims)
        gemms(timer, dims, device, writer, [1, 8, 64] if quick else GEMM_M, l2)
        print(f"{preset}: GEMMs done ({time.perf_counter() - start:.0f} s)", flush=True)
        model = Decoder(dims, device)
        weights = sum(t.numel() * 2 for layer in model.layers for t in layer.values())
        free = torch.cuda.mem_get_info()[0] if timer.cuda else 1 << 30
        per_token = dims.layers * 2 * dims.kv_heads * dims.head_dim * 2
        cap = min(524288, int((free - 12 * 2**30) // per_token)) if timer.cuda else 4096
        decode_points(timer, dims, device, writer, [1, 4] if quick else DECODE_BATCH,
                      [32, 128] if quick else CONTEXTS, cap, model)
        print(f"{preset}: decode done, weights {weights / 1e9:.1f} GB, cache cap {cap} "
              f"tokens ({time.perf_counter() - start:.0f} s)", flush=True)
        prefill_points(timer, dims, device, writer, [32, 64] if quick else PREFILL, model)
        print(f"{preset}: prefill done ({time.perf_counter() - start:.0f} s)", flush=True)
        del model
        if timer.cuda:
            torch.cuda.empty_cache()


def provenance(device: str, limits: dict[str, float], args: argparse.Namespace) -> dict:
    info: dict[str, object] = {
        "date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "torch": torch.__version__, "cuda": torch.version.cuda, "device": device,
        "python": sys.version.split()[0], "ceilings": limits, "models": args.models,
        "quick": args.quick, "method": __doc__.split("Method")[1].strip()}
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(0)
        info |= {"gpu": props.name, "sm_count": props.multi_processor_count,
                 "memory_gib": round(props.total_memory / 2**30, 1),
                 "l2_mb": round(getattr(props, "L2_cache_size", 0) / 1e6, 1)}
        try:
            import subprocess
            info["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,clocks.max.mem",
                 "--format=csv,noheader"], capture_output=True, text=True, timeout=20
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            info["driver"] = "unknown"
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--models", default="qwen3-1.7b,qwen3-8b")
    parser.add_argument("--quick", action="store_true", help="a tiny grid, any device")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--compiled", default="",
                        help="only decode steps with compiled layers, at these batches "
                             "(e.g. 1,16,128) and context 2048")
    args = parser.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    args.out.mkdir(parents=True, exist_ok=True)
    timer = Timer(device, 3 if args.quick else args.repeats)
    torch.manual_seed(0)
    start = time.perf_counter()
    limits = ceilings(timer, device)
    print(f"{device}: copy {limits['copy_tb_s']:.2f} TB/s, bf16 {limits['bf16_tflops']:.0f} "
          f"TFLOP/s", flush=True)
    info = provenance(device, limits, args)
    info["check_rel_error"] = check_attention(device)
    print(f"attention against the plain form: {info['check_rel_error']}", flush=True)
    (args.out / "provenance.json").write_text(json.dumps(info, indent=1))
    writer = Writer(args.out)
    if args.compiled:
        for preset in args.models.split(","):
            dims = tiny(dims_of(preset)) if args.quick else dims_of(preset)
            compiled_points(timer, dims, device, writer,
                            [int(b) for b in args.compiled.split(",")],
                            128 if args.quick else 2048, Decoder(dims, device))
            print(f"{preset}: compiled decode done ({time.perf_counter() - start:.0f} s)",
                  flush=True)
    else:
        full_grid(args, timer, device, writer, start)
    info["wall_s"] = round(time.perf_counter() - start, 1)
    (args.out / "provenance.json").write_text(json.dumps(info, indent=1))
    writer.file.close()
    for row in writer.rows:
        if row["kind"] in ("decode", "prefill") and row["ms"] != "":
            print(f"{row['kind']:8} {row['model']:11} b={row['batch']:<4} c={row['context']:<5} "
                  f"{row['ms']:8.3f} ms  eager {row['eager_ms'] or '-'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
