"""Measured kernel times for a training step, read from aiconfigurator-core's tables.

The engine's step tables ask the database's estimator for whole decode steps
(`harness.sim.kernels`); a training step is made of the same kernels at other shapes, so
this module reads the tables themselves: `gemm` (m, n, k -> ms, per dtype), the
`context_attention` table (a causal prefill of `isl` tokens, forward only), `moe` (the
fused experts' forward) and NCCL's `comm` table (all_gather, reduce_scatter, all_reduce,
alltoall by message size and GPUs). Each table is the vLLM framework's at the database's
current version for the GPU (`backend_version`), as the engine is priced, and NCCL's
newest. A shape off the grid takes the nearest tabulated one's achieved rate (FLOP/s, or
bytes/s for a collective) times its own work: GEMM time is close to proportional to its
FLOPs at the sizes a trainer runs (m of thousands of tokens), and the rate, not the time,
is what carries over between neighbouring shapes. Tables load once per process; every
time comes back a Python float (a numpy scalar's arithmetic costs several times a float's,
and the trainer adds these times up per micro-batch: `harness.sim.trainer.pricer`).

A GPU without tables of its own borrows another's as the engine does
(presets/kernel_gpus.toml): under the "per-op" rule (H20) each kernel's time is carried
by `harness.sim.kernels.standin.carry` from its FLOPs and bytes (a compute-bound GEMM by
the ratio of BF16 peaks); under the "scale" rule a kernel takes the preset's
`prefill_scale` (the trainer's kernels are compute-bound, as a prefill is); a "preset-link"
GPU's collectives go over its preset's link, not the borrowed GPU's NCCL table.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from harness.core.config import ConfigError
from harness.sim.kernels.estimator import _package_dir, backend_version, quiet
from harness.sim.kernels.gpus import kernel_gpu
from harness.sim.kernels.standin import OpShape, carry
from harness.sim.presets import Hardware, load_hardware

BACKEND = "vllm"  # the framework whose kernel tables price training (graph-timed GEMMs)
GEMM_DTYPES = {"bf16": "bfloat16", "fp8": "fp8"}  # fp8: per-tensor scaled (Cutlass)
NODE_GPUS = 8  # NCCL's table stops at 8 GPUs: one NVLink node
# Beyond one node a collective crosses the scale-out network: 400 Gb/s per GPU (one
# ConnectX-7 NIC per GPU on DGX H100/H200/B200 systems, NVIDIA DGX H100 datasheet), 50 GB/s.
INTER_NODE_GBS = 50.0


class TrainerKernelError(ConfigError):
    """The database cannot price this trainer; the message is one line for a user."""


@dataclass(frozen=True)
class Tables:
    """One GPU's tables for the trainer model."""

    system: str
    gemm: pd.DataFrame
    attention: pd.DataFrame
    moe: pd.DataFrame
    comm: pd.DataFrame


def _data(system: str) -> Path:
    with quiet():
        return _package_dir() / "systems" / "data" / system


@cache
def tables(gpu: str) -> Tables:
    """The tables of a hardware preset's database GPU (its own or its documented stand-in)."""
    kg = kernel_gpu(gpu)
    if kg is None:
        raise TrainerKernelError(f"sim.train_model=kernels: no measured kernels for {gpu}; "
                                 f"use sim.train_model=mfu")
    version = backend_version(kg.system, BACKEND)
    if version is None:
        raise TrainerKernelError(f"sim.train_model=kernels: no measured {BACKEND} kernels on "
                                 f"{kg.system} (for {gpu}); use sim.train_model=mfu")
    root = _data(kg.system)
    gemm = pd.read_parquet(root / "gemm" / BACKEND / version / "gemm_perf.parquet")
    attn = pd.read_parquet(root / "attention" / BACKEND / version
                           / "context_attention_perf.parquet")
    attn = attn[attn["kv_cache_dtype"] == "bfloat16"]
    if "window_size" in attn.columns:  # older tables (A100's vLLM 0.14.0) time no windows
        attn = attn[attn["window_size"] == 0]
    moe_path = root / "moe" / BACKEND / version / "moe_perf.parquet"
    moe = pd.read_parquet(moe_path) if moe_path.exists() else pd.DataFrame()
    nccl = sorted((root / "comm" / "nccl").glob("*/nccl_perf.parquet"),
                  key=lambda p: tuple(int(x) for x in p.parent.name.split(".") if x.isdigit()))
    comm = pd.read_parquet(nccl[-1]) if nccl else pd.DataFrame()
    return Tables(kg.system, gemm, attn, moe, comm)


def carried(gpu: str, seconds: float, cls: str, flops: float, nbytes: float) -> float:
    """A kernel's time measured on the preset's database GPU, carried to the preset."""
    kg = kernel_gpu(gpu)
    if kg is None or not kg.stand_in or seconds <= 0:
        return seconds
    if kg.rule == "per-op":
        shape = OpShape(cls, flops=flops, bytes=nbytes)
        return carry(seconds * 1e3, shape, *_presets(kg.source, gpu)) / 1e3
    return seconds * kg.prefill_scale


@cache
def _presets(source: str, gpu: str) -> tuple[Hardware, Hardware]:
    """The stand-in's and the preset's hardware, read once per process as the kernel
    times carried with them are kept (`load_hardware` finds and checks the preset's row
    each call: 0.2 ms, which every new shape of a per-op GPU paid twice)."""
    return load_hardware(source), load_hardware(gpu)


def _nearest(values: np.ndarray, want: float) -> float:
    """The tabulated value closest to `want` on a log scale."""
    return float(values[np.argmin(np.abs(np.log(values) - np.log(max(want, 1.0))))])


@cache
def _gemm_curves(gpu: str, dtype: str) -> dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]:
    """Every tabulated (n, k) of a dtype: its m grid and the fastest kernel's ms at each
    (the framework has several), grouped once (grouping the rows of each (n, k) as a run
    met it cost 2-4 ms a shape, most of a fresh process's pricing)."""
    t = tables(gpu).gemm
    best = t[t["gemm_dtype"] == dtype].groupby(["n", "k", "m"])["latency"].min()
    n = best.index.get_level_values("n").to_numpy()
    k = best.index.get_level_values("k").to_numpy()
    m = best.index.get_level_values("m").to_numpy(dtype=float)
    lat = best.to_numpy(dtype=float)
    cuts = [0, *(np.flatnonzero((n[1:] != n[:-1]) | (k[1:] != k[:-1])) + 1), len(n)]
    return {(int(n[a]), int(k[a])): (m[a:b], lat[a:b]) for a, b in itertools.pairwise(cuts)}


def _gemm_curve(gpu: str, dtype: str, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    return _gemm_curves(gpu, dtype).get((n, k), (np.array([]), np.array([])))


@cache
def _gemm_axes(gpu: str, dtype: str) -> tuple[np.ndarray, dict[float, np.ndarray]]:
    """The tabulated n values of a dtype, and the k values tabulated at each."""
    t = tables(gpu).gemm
    sub = t[t["gemm_dtype"] == dtype]
    ks = {float(n): np.unique(g.to_numpy(dtype=float)) for n, g in sub.groupby("n")["k"]}
    return np.array(sorted(ks)), ks


@cache
def _gemm_grid(gpu: str, dtype: str, n: int, k: int) -> tuple[float, float]:
    """The tabulated (n, k) nearest to (n, k) on a log scale, n first (once per shape:
    `gemm_s` asks again for each new m)."""
    ns, ks = _gemm_axes(gpu, dtype)
    n0 = _nearest(ns, n)
    return n0, _nearest(ks[n0], k)


@cache
def gemm_s(gpu: str, m: int, n: int, k: int, precision: str = "bf16") -> float:
    """Seconds of one (m x k)(k x n) product: the nearest tabulated (n, k) at this m
    (interpolated in m), scaled by the FLOPs' ratio."""
    if m <= 0 or n <= 0 or k <= 0:
        return 0.0
    dtype = GEMM_DTYPES[precision]
    n0, k0 = _gemm_grid(gpu, dtype, n, k)
    ms, lat = _gemm_curve(gpu, dtype, int(n0), int(k0))
    if m >= ms[-1]:  # past the grid: the largest m's rate
        t0 = lat[-1] * m / ms[-1]
    else:
        t0 = float(np.interp(m, ms, lat))
    flops, nbytes = 2.0 * m * n * k, 2.0 * (m * k + k * n + m * n)
    return float(carried(gpu, t0 * (n * k) / (n0 * k0) * 1e-3, "gemm", flops, nbytes))


@cache
def _attention_point(gpu: str, heads: int, kv_heads: int, head_dim: int) -> tuple[
        float, float, float, np.ndarray, np.ndarray]:
    """The nearest tabulated (heads, kv heads, head dim) at batch 1: its isl grid and ms."""
    t = tables(gpu).attention
    t = t[t["batch_size"] == 1]
    d0 = _nearest(t["head_dim"].unique().astype(float), head_dim)
    t = t[t["head_dim"] == d0]
    h0 = _nearest(t["num_heads"].unique().astype(float), heads)
    t = t[t["num_heads"] == h0]
    g0 = _nearest(t["num_key_value_heads"].unique().astype(float), kv_heads)
    t = t[t["num_key_value_heads"] == g0].groupby("isl")["latency"].min()
    return h0, g0, d0, t.index.to_numpy(dtype=float), t.to_numpy(dtype=float)


@cache
def attention_forward_s(gpu: str, seq_len: int, heads: int, kv_heads: int,
                        head_dim: int) -> float:
    """Seconds of one sequence's causal attention forward (all heads of one layer on one
    GPU): the table's batch-1 prefill at this length, scaled by heads and head dim; past
    the table's longest prompt the time grows as the square of the length (causal
    attention's FLOPs), from the longest's rate."""
    if seq_len <= 0:
        return 0.0
    h0, _, d0, isl, lat = _attention_point(gpu, heads, kv_heads, head_dim)
    if seq_len >= isl[-1]:
        t0 = lat[-1] * (seq_len / isl[-1]) ** 2
    else:
        t0 = float(np.interp(seq_len, isl, lat))
    flops = 2.0 * heads * head_dim * seq_len * seq_len  # QK^T and PV, half under the mask
    nbytes = 2.0 * seq_len * (2 * heads + 2 * kv_heads) * head_dim
    return float(carried(gpu, t0 * (heads * head_dim) / (h0 * d0) * 1e-3, "attention",
                         flops, nbytes))


def attention_forward_many(gpu: str, lengths: list[int], heads: int, kv_heads: int,
                           head_dim: int) -> list[float]:
    """`attention_forward_s` of each of `lengths`, the same floats, worked out at once
    where the table interpolates (one `np.interp`, the stand-in's carry as array
    arithmetic in the same order); a length past the table's longest or of no tokens
    asks the one-length function (its square is Python's). A trainer new to a process
    prices every new length it meets, thousands a run (issue #36: a tenth of a verl
    fully-async run's CPU went to these look-ups, one at a time)."""
    if not lengths:
        return []
    h0, _, d0, isl, lat = _attention_point(gpu, heads, kv_heads, head_dim)
    n = np.asarray(lengths, dtype=np.int64)
    inside = (n > 0) & (n < isl[-1])
    out = [0.0] * len(lengths)
    for i in np.flatnonzero(~inside).tolist():
        out[i] = attention_forward_s(gpu, lengths[i], heads, kv_heads, head_dim)
    where = np.flatnonzero(inside)
    if not len(where):
        return out
    m = n[where]
    seconds = np.interp(m, isl, lat) * (heads * head_dim) / (h0 * d0) * 1e-3
    flops = 2.0 * heads * head_dim * m * m
    nbytes = 2.0 * m * (2 * heads + 2 * kv_heads) * head_dim
    for i, value in zip(where.tolist(), _carried_attention(gpu, seconds, flops, nbytes).tolist(),
                        strict=True):
        out[i] = value
    return out


def _carried_attention(gpu: str, seconds: np.ndarray, flops: np.ndarray,
                       nbytes: np.ndarray) -> np.ndarray:
    """`carried(gpu, s, "attention", f, b)` of each, as arrays: `carry`'s steps for an
    attention op (its k is 1), elementwise, in the same order."""
    kg = kernel_gpu(gpu)
    if kg is None or not kg.stand_in:
        return seconds
    if kg.rule != "per-op":
        return np.where(seconds <= 0, seconds, seconds * kg.prefill_scale)
    src, dst = _presets(kg.source, gpu)
    ms = seconds * 1e3

    def roofline(hw: Hardware) -> np.ndarray:  # `roofline_ms`: max(a, b) keeps a on ties
        a, b = nbytes / (hw.hbm_bandwidth_gbs * 1e9), flops / (hw.bf16_tflops * 1e12)
        return 1e3 * np.where(b > a, b, a)

    r_src, r_dst = roofline(src), roofline(dst)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(ms < r_src, ms * r_dst / r_src, r_dst + (ms - r_src) * 1.0)
    out = np.where(r_src <= 0.0, ms, out)
    return np.where(seconds <= 0, seconds, np.where(ms <= 0.0, 0.0, out) / 1e3)


@cache
def _moe_curve(gpu: str, hidden: int, inter: int, experts: int, topk: int, ep: int) -> tuple[
        float, np.ndarray, np.ndarray]:
    t = tables(gpu).moe
    if t.empty:
        raise TrainerKernelError(f"sim.train_model=kernels: the database has no MoE table for "
                                 f"{gpu}; use sim.train_model=mfu")
    t = t[(t["moe_dtype"] == "bfloat16") & (t["moe_tp_size"] == 1)
          & (t["distribution"] == "balanced")]
    if t.empty:  # a100's tables hold only other precisions' expert rows
        raise TrainerKernelError(f"sim.trainer_gpu={gpu}: the database has no BF16 MoE expert "
                                 f"kernels; use sim.train_model=mfu")
    e0 = _nearest(t["moe_ep_size"].unique().astype(float), ep)
    t = t[t["moe_ep_size"] == e0]
    h0 = _nearest(t["hidden_size"].unique().astype(float), hidden)
    t = t[t["hidden_size"] == h0]
    i0 = _nearest(t["inter_size"].unique().astype(float), inter)
    t = t[t["inter_size"] == i0]
    k0 = _nearest(t["topk"].unique().astype(float), topk)
    t = t[t["topk"] == k0]
    x0 = _nearest(t["num_experts"].unique().astype(float), experts)
    t = t[t["num_experts"] == x0].groupby("num_tokens")["latency"].min()
    work = h0 * i0 * k0 / e0  # what one token costs the tabulated shape, per GPU
    return work, t.index.to_numpy(dtype=float), t.to_numpy(dtype=float)


@cache
def moe_forward_s(gpu: str, tokens: int, hidden: int, inter: int, experts: int, topk: int,
                  ep: int = 1) -> float:
    """Seconds of one MoE layer's experts forward (fused kernel, balanced routing) for
    `tokens` tokens on one GPU of an EP group of `ep`: the nearest tabulated shape,
    interpolated in tokens (past the grid, its largest rate), scaled by the work a token
    brings (hidden x expert width x top-k / EP)."""
    if tokens <= 0:
        return 0.0
    work0, toks, lat = _moe_curve(gpu, hidden, inter, experts, topk, ep)
    t0 = lat[-1] * tokens / toks[-1] if tokens >= toks[-1] else float(
        np.interp(tokens, toks, lat))
    flops = 6.0 * tokens * hidden * inter * topk / ep  # gate, up and down
    nbytes = 2.0 * (3 * hidden * inter * experts / ep + 2 * tokens * hidden * topk)
    return float(carried(gpu, t0 * (hidden * inter * topk / ep) / work0 * 1e-3, "gemm",
                         flops, nbytes))


@cache
def _comm_curve(gpu: str, op: str, gpus: int) -> tuple[np.ndarray, np.ndarray]:
    t = tables(gpu).comm
    if t.empty:
        return np.array([]), np.array([])
    t = t[(t["op_name"] == op) & (t["nccl_dtype"] == "half") & (t["num_gpus"] == gpus)]
    t = t.groupby("message_size")["latency"].min()
    return t.index.to_numpy(dtype=float), t.to_numpy(dtype=float)


@cache
def collective_s(gpu: str, op: str, nbytes: float, gpus: int, link_gbs: float) -> float:
    """Seconds of one NCCL collective (`op`: all_gather, reduce_scatter, all_reduce,
    alltoall) of `nbytes` bytes (the table's message size: the whole buffer) over `gpus`
    GPUs. Within a node, NCCL's measured table (interpolated in size; past it, its
    largest size's bus rate); over nodes, the ring's (g-1)/g share of the bytes over
    `INTER_NODE_GBS`; with no NCCL table, the preset's `link_gbs`."""
    if gpus <= 1 or nbytes <= 0:
        return 0.0
    if gpus > NODE_GPUS:
        factor = 2.0 if op == "all_reduce" else 1.0
        return factor * nbytes * (gpus - 1) / gpus / (INTER_NODE_GBS * 1e9)
    g = min((x for x in (2, 4, 8) if x >= gpus), default=8)
    kg = kernel_gpu(gpu)
    preset_link = kg is not None and kg.comm == "preset-link"
    sizes, lat = (np.array([]), np.array([])) if preset_link else _comm_curve(gpu, op, g)
    if sizes.size == 0:
        factor = 2.0 if op == "all_reduce" else 1.0
        return factor * nbytes * (gpus - 1) / gpus / (link_gbs * 1e9)
    if nbytes >= sizes[-1]:
        return float(lat[-1] * nbytes / sizes[-1]) * 1e-3
    return float(np.interp(nbytes, sizes, lat)) * 1e-3
