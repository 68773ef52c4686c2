"""The stand-in rules tested inside the database: predict one measured GPU from another.

Why: a GPU without tables (H20, A100 PCIe, ...) is priced from another GPU's tables. Where
the database measured both GPUs of a pair, the prediction can be held against the target's
own tables, op class by op class. Pairs: H200 -> H100 (one die, bandwidth differs) and
H100 -> A100 (another generation: bandwidth, FLOPs and NVLink differ). Two rules side by
side: the per-op-class rule (`harness.sim.kernels.standin`) and the old one ratio (compute
ops of a decode step x HBM ratio, all-reduce as measured; prefill x BF16 FLOPs ratio, as
presets/kernel_gpus.toml scales them).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd

from harness.sim.kernels.estimator import backend_version, config_dir, quiet
from harness.sim.kernels.gpus import kernel_gpu
from harness.sim.kernels.standin import Dims, carry_ops, op_class
from harness.sim.presets import Hardware, load_hardware

PAIRS = (("h200-sxm", "h100-sxm"), ("h100-sxm", "a100-80gb-sxm"))
# (label, aiconfigurator-core model_configs file stem, TP): dense models and one MoE (whose
# estimator wants moe_tp = TP, so TP 1 here).
MODELS = (("Qwen3-8B", "Qwen--Qwen3-8B", 1), ("Qwen3-8B", "Qwen--Qwen3-8B", 2),
          ("Qwen3-32B", "Qwen--Qwen3-32B", 2), ("Llama-3.1-8B", "meta-llama--Meta-Llama-3.1-8B", 1),
          ("Qwen3-30B-A3B", "Qwen--Qwen3-30B-A3B", 1))
BATCHES = (1, 4, 16, 64, 256, 512)
CONTEXTS = (512, 2048, 8192)
PROMPTS = (128, 512, 2048, 8192)
CLASSES = ("gemm", "moe", "attention", "elementwise", "comm", "step")


def config_of(stem: str) -> dict[str, Any]:
    """A model's config.json as aiconfigurator-core ships it (model_configs/)."""
    from harness.sim.presets import shipped_config

    return dict(json.loads(shipped_config(stem).read_text("utf-8")))


@cache
def _handle(stem: str, system: str, backend: str, tp: int, cache_root: Path) -> Any:
    """The estimator of one engine, compiled once (0.2-2 s) from a local config folder."""
    from aiconfigurator_core.sdk.engine import EngineHandle

    folder = config_dir(config_of(stem), cache_root)
    with quiet():
        return EngineHandle.compile(str(folder), system, backend,
                                    backend_version=backend_version(system, backend),
                                    tp_size=tp)


@cache
def _ops(stem: str, system: str, backend: str, tp: int, cache_root: Path, phase: str,
         batch: int, length: int) -> dict[str, float]:
    """The database's per-op ms of one decode step (or one prompt's prefill); each point is
    asked once, though H100 is the target of one pair and the source of the other."""
    handle = _handle(stem, system, backend, tp, cache_root)
    with quiet():
        if phase == "decode":
            rows = handle.decode_step_per_op(batch, length, 2)
        else:
            rows, _ = handle.run_static_per_op(batch_size=1, isl=length, osl=1)
    prefix = "generation_" if phase == "decode" else "context_"
    return {name.removeprefix(prefix): float(ms) for name, ms, *_ in rows}


def _old(ops: dict[str, float], phase: str, src: Hardware, dst: Hardware) -> dict[str, float]:
    """The one-ratio rule: decode compute x HBM ratio (comm kept); prefill x FLOPs ratio."""
    if phase == "prefill":
        scale = src.bf16_tflops / dst.bf16_tflops
        return {name: ms * scale for name, ms in ops.items()}
    scale = src.hbm_bandwidth_gbs / dst.hbm_bandwidth_gbs
    return {name: ms if op_class(name) == "comm" else ms * scale for name, ms in ops.items()}


def _by_class(ops: dict[str, float]) -> dict[str, float]:
    sums = {cls: 0.0 for cls in CLASSES}
    for name, ms in ops.items():
        sums[op_class(name)] += ms
        sums["step"] += ms
    return sums


def study(cache_root: Path, backend: str = "vllm",
          models: Iterable[tuple[str, str, int]] = MODELS,
          batches: Iterable[int] = BATCHES, contexts: Iterable[int] = CONTEXTS,
          prompts: Iterable[int] = PROMPTS) -> pd.DataFrame:
    """One row per (model, TP, pair, phase, batch, length, op class) the target measures:
    the target's measured ms, both rules' predictions and their relative errors."""
    rows: list[dict[str, object]] = []
    points = [("decode", b, c) for b in batches for c in contexts]
    points += [("prefill", 1, p) for p in prompts]
    for label, stem, tp in models:
        dims = Dims.from_config(config_of(stem))
        for src_name, dst_name in PAIRS:
            src, dst = load_hardware(src_name), load_hardware(dst_name)
            systems = [kernel_gpu(name) for name in (src_name, dst_name)]
            assert systems[0] and systems[1], "both GPUs of a pair are in the database"
            for phase, batch, length in points:
                measured = _ops(stem, systems[0].system, backend, tp, cache_root, phase,
                                batch, length)
                truth = _by_class(_ops(stem, systems[1].system, backend, tp, cache_root,
                                       phase, batch, length))
                new = _by_class(carry_ops(measured, dims, tp, batch, length, phase, src, dst))
                old = _by_class(_old(measured, phase, src, dst))
                for cls in CLASSES:
                    if truth[cls] <= 0.0:
                        continue
                    rows.append({"backend": backend, "model": label, "tp": tp,
                                 "pair": f"{src_name}->{dst_name}",
                                 "phase": phase, "batch": batch, "length": length,
                                 "op_class": cls, "measured_ms": truth[cls],
                                 "new_ms": new[cls], "old_ms": old[cls],
                                 "new_err": new[cls] / truth[cls] - 1.0,
                                 "old_err": old[cls] / truth[cls] - 1.0})
    return pd.DataFrame(rows)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Median and worst |relative error| of both rules, per backend, pair, phase and op
    class (the median's sign is in the bias columns: below zero, the rule is fast)."""
    work = df.assign(new_abs=df.new_err.abs(), old_abs=df.old_err.abs())
    grouped = work.groupby(["backend", "pair", "phase", "op_class"], sort=False)
    out = grouped.agg(n=("new_abs", "size"), new_median=("new_abs", "median"),
                      new_worst=("new_abs", "max"), new_bias=("new_err", "median"),
                      old_median=("old_abs", "median"), old_worst=("old_abs", "max"),
                      old_bias=("old_err", "median"))
    return out.reset_index()


def markdown(df: pd.DataFrame) -> str:
    """The summary as a markdown table (percent), with one line on what it covers."""
    table = summary(df)
    models = ", ".join(sorted({f"{m} TP{t}" for m, t in zip(df.model, df.tp, strict=True)}))
    decode = df[df.phase == "decode"]
    lines = [f"Stand-in rules inside the database ({models}; decode batches "
             f"{decode.batch.min()}-{decode.batch.max()}, contexts {decode.length.min()}-"
             f"{decode.length.max()}); |error| in %, bias = signed median:", "",
             "| backend | pair | phase | class | n | new median | new worst | new bias "
             "| old median | old worst | old bias |", "|---" * 11 + "|"]
    for r in table.itertuples():
        lines.append(f"| {r.backend} | {r.pair} | {r.phase} | {r.op_class} | {r.n} "
                     f"| {100 * r.new_median:.1f} | {100 * r.new_worst:.1f} "
                     f"| {100 * r.new_bias:+.1f} | {100 * r.old_median:.1f} "
                     f"| {100 * r.old_worst:.1f} | {100 * r.old_bias:+.1f} |")
    return "\n".join(lines)


def report(cache_root: Path, backends: Iterable[str] = ("vllm", "sglang")
           ) -> tuple[pd.DataFrame, str]:
    """The study over each backend, and its markdown summary. About 330 estimator calls per
    backend (5-50 ms each) and 15 compilations (0.2-2 s): well under a minute each."""
    df = pd.concat([study(cache_root, backend) for backend in backends], ignore_index=True)
    return df, markdown(df)
