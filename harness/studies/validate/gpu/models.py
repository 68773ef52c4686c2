"""The roofline step model against the measured-kernel one, over model, GPU, TP, batch, context.

Why: a run prices its engine with the kernels wherever the database covers the GPU, and with
the roofline (at the `rolloutpipe` fitted efficiency) elsewhere, so the two should agree where
both exist. This grid shows where they part, and whether the gap follows the weight bytes each
GPU reads per layer (small reads are where fixed per-step costs, not bandwidth, dominate).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from harness.core.config import RunConfig
from harness.core.plots import save_figure
from harness.sim.kernels.gpus import kernel_gpu
from harness.sim.kernels.source import uncovered
from harness.sim.presets import hardware_names, load_hardware, load_model, model_names
from harness.studies.steps import decode_model

TPS = (1, 2, 4, 8)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
CONTEXTS = (512, 2048, 8192, 32768)
SKIP_GPUS = ("cpu-2core",)
MEM_SHARE = 0.9  # weights per GPU must stay under this share of its memory
BUCKETS = ((1, 16, "1-16"), (32, 128, "32-128"), (256, 512, "256-512"))
WEIGHT_BINS = ((0.0, 90.0, "<90 MB"), (90.0, 700.0, "90-700 MB"), (700.0, math.inf, ">700 MB"))
PLOT_CONTEXT = 2048


def fits(model: str, gpu: str, tp: int) -> bool:
    """Whether the weights, split over tp GPUs, leave room for a KV cache."""
    return load_model(model).weight_bytes() / tp < MEM_SHARE * load_hardware(gpu).memory_gb * 1e9


def grid(out_dir: Path, backend: str = "sglang", models: Iterable[str] | None = None,
         gpus: Iterable[str] | None = None, tps: Iterable[int] = TPS,
         batches: Iterable[int] = BATCHES, contexts: Iterable[int] = CONTEXTS) -> pd.DataFrame:
    """One row per cell both models price; writes models.csv and models.png into out_dir.
    What the estimator could not model is in `df.attrs["skipped"]`: (model, gpu, tp, why)."""
    sim = RunConfig().sim
    sim.engine_backend, sim.calibration = backend, "rolloutpipe"
    rows: list[dict[str, object]] = []
    skipped: list[tuple[str, str, int, str]] = []
    for gpu in [g for g in (gpus or hardware_names()) if g not in SKIP_GPUS]:
        for model in models or model_names():
            if uncovered(gpu, backend) is not None:
                break  # no kernels for this GPU: nothing to compare (summary names it)
            for tp in tps:
                if not fits(model, gpu, tp):
                    continue
                sim.model, sim.rollout_gpu, sim.rollout_tp = model, gpu, tp
                try:
                    sim.step_model = "kernels"
                    kern, source = decode_model(sim)
                    sim.step_model = "roofline"
                    roof, _ = decode_model(sim)
                    for b in batches:  # the estimator may fail only when asked
                        kern.steps_time(1, b, b * max(contexts))
                except Exception as err:  # the estimator raises many kinds
                    skipped.append((model, gpu, tp, _reason(err)))
                    continue
                for b in batches:
                    for ctx in contexts:
                        r_ms = 1e3 * roof.steps_time(1, b, b * ctx)
                        k_ms = 1e3 * kern.steps_time(1, b, b * ctx)
                        rows.append({"model": model, "gpu": gpu, "tp": tp, "batch": b,
                                     "context": ctx, "roofline_ms": r_ms, "kernels_ms": k_ms,
                                     "ratio": r_ms / k_ms, "kernels_source": source})
    df = pd.DataFrame(rows, columns=["model", "gpu", "tp", "batch", "context", "roofline_ms",
                                     "kernels_ms", "ratio", "kernels_source"])
    df.attrs["skipped"] = skipped
    out_dir.mkdir(parents=True, exist_ok=True)
    df.to_csv(out_dir / "models.csv", index=False, float_format="%.6g")
    plot(df, out_dir / "models.png")
    return df


def _reason(err: Exception) -> str:
    """The estimator's complaint in a few words: the parenthesis of a KernelError, else the
    first line."""
    first = (str(err).strip().splitlines() or [type(err).__name__])[0]
    inner = re.search(r"\(([^()]*)\)$", first)
    return inner.group(1) if inner else first


def plot(df: pd.DataFrame, path: Path) -> None:
    """Ratio against batch at one context: a faint line per engine, the median bold."""
    import matplotlib.pyplot as plt

    at = df[df["context"] == PLOT_CONTEXT]
    gpus = list(dict.fromkeys(at["gpu"])) or ["(none)"]
    fig, axes = plt.subplots(1, len(gpus), figsize=(10, 4), sharey=True, squeeze=False)
    for ax, gpu in zip(axes[0], gpus, strict=True):
        sub = at[at["gpu"] == gpu]
        for _, line in sub.groupby(["model", "tp"]):
            ax.plot(line["batch"], line["ratio"], color="tab:blue", alpha=0.2, lw=0.8)
        if not sub.empty:
            med = sub.groupby("batch")["ratio"].median()
            ax.plot(med.index, med.to_numpy(), color="black", lw=2.2, label="median")
        ax.axhline(1.0, color="tab:red", ls="--", lw=1, label="equal")
        ax.set_xscale("log", base=2)
        ax.set_xticks([1, 8, 64, 512], ["1", "8", "64", "512"])
        ax.set_title(gpu, fontsize=9)
        ax.set_xlabel("batch (sequences)")
    axes[0][0].set_ylabel("roofline / kernels step time")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"Decode step: roofline (rolloutpipe) over measured kernels, context "
                 f"{PLOT_CONTEXT}; one faint line per (model, TP)", fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)


def _bucket(batch: int) -> str:
    return next((name for lo, hi, name in BUCKETS if lo <= batch <= hi), "other")


def weight_mb_per_gpu_layer(model: str, tp: int) -> float:
    """The weight MB each GPU reads per layer: what decides if a small step hits peak BW."""
    m = load_model(model)
    return m.weight_bytes() / (tp * m.layers) / 1e6


def _weight_effect(small: pd.DataFrame) -> list[str]:
    """Median ratio per weight-per-GPU-per-layer bin: pooled, then per GPU, since GPUs differ
    more than the bins do and the pooled bins hold different GPU mixes."""
    def med(sub: pd.DataFrame, lo: float, hi: float) -> str:
        r = sub.loc[(sub["mb"] >= lo) & (sub["mb"] < hi), "ratio"]
        return f"{r.median():.2f}" if len(r) else "-"

    pooled = [f"{name} {med(small, lo, hi)}" for lo, hi, name in WEIGHT_BINS]
    out = ["Weight bytes per GPU per layer (weight_bytes / (tp * layers)), batch <= 16: the",
           f"median ratio is {', '.join(pooled)}. Per GPU:", "",
           "| gpu | " + " | ".join(name for *_, name in WEIGHT_BINS) + " | trend |",
           "|---|" + "---|" * (len(WEIGHT_BINS) + 1)]
    for gpu, sub in small.groupby("gpu", sort=False):
        meds = [med(sub, lo, hi) for lo, hi, _ in WEIGHT_BINS]
        vals = [float(m) for m in meds if m != "-"]
        trend = "flat" if len(vals) < 2 or abs(vals[-1] / vals[0] - 1) < 0.03 else (
            "falls" if vals[-1] < vals[0] else "rises")
        out.append(f"| {gpu} | " + " | ".join(meds) + f" | {trend} with weight |")
    return out


def summary(df: pd.DataFrame) -> str:
    """Markdown: ratio per GPU and batch bucket, the most-parted cells, the per-layer effect."""
    out = ["Ratio = roofline / kernels decode step time (median, [min-max]).", ""]
    d = df.assign(bucket=df["batch"].map(_bucket))
    names = [name for *_, name in BUCKETS]
    out += ["| gpu | " + " | ".join(f"batch {n}" for n in names) + " |",
            "|---|" + "---|" * len(names)]
    for gpu, sub in d.groupby("gpu", sort=False):
        cells = []
        for n in names:
            r = sub.loc[sub["bucket"] == n, "ratio"]
            cells.append(f"{r.median():.2f} [{r.min():.2f}-{r.max():.2f}]" if len(r) else "-")
        out.append(f"| {gpu} | " + " | ".join(cells) + " |")
    small = d[d["batch"] <= 16].copy()
    small["log"] = np.log(small["ratio"]).abs()
    out += ["", "Where they part most (batch <= 16, largest |log ratio|):", "",
            "| model | gpu | tp | batch | context | roofline ms | kernels ms | ratio |",
            "|---|---|---|---|---|---|---|---|"]
    for _, r in small.nlargest(5, "log").iterrows():
        out.append(f"| {r['model']} | {r['gpu']} | {r['tp']} | {r['batch']} | {r['context']} "
                   f"| {r['roofline_ms']:.3f} | {r['kernels_ms']:.3f} | {r['ratio']:.2f} |")
    small["mb"] = [weight_mb_per_gpu_layer(m, t)
                   for m, t in zip(small["model"], small["tp"], strict=True)]
    out += ["", *_weight_effect(small)]
    gpus = [g for g in hardware_names() if g not in SKIP_GPUS and kernel_gpu(g) is None]
    if gpus:
        out += ["", f"No measured kernels, so roofline only and not compared: {', '.join(gpus)}."]
    left: dict[tuple[str, int, str], list[str]] = {}
    for model, gpu, tp, why in df.attrs.get("skipped", []):
        short = why if len(why) <= 64 else why[:64].rsplit(" ", 1)[0] + " ..."
        left.setdefault((model, tp, short), []).append(gpu)
    if left:
        out += ["", "Left out (the estimator cannot model them):", ""]
        out += [f"- {m} TP {t} on {len(g)} GPU(s): {w}" for (m, t, w), g in left.items()]
    return "\n".join(out) + "\n"
