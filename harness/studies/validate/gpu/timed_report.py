"""The GPU-timed comparison (`timed`) as CSV files, a figure and a section of the summary."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pandas as pd

from harness.core.plots import save_figure
from harness.sim.kernels.estimator import backend_version, package_version
from harness.sim.kernels.gpus import kernel_gpu
from harness.studies.validate.gpu import timed

M_BUCKETS = ((1, 16, "1-16"), (32, 256, "32-256"), (512, 8192, "512-8192"))


def _cell(r: pd.Series) -> str:
    r = r.dropna()
    def short(x: float) -> str:  # 0.40 -> .40: the tables fit 100 columns
        return f"{x:.2f}".removeprefix("0")

    return f"{r.median():.2f} [{short(r.min())}-{short(r.max())}]" if len(r) else "-"


def _pct(r: pd.Series) -> str:
    return f"{100 * r.median():.1f}% ({100 * r.max():.1f}%)" if len(r) else "-"


def _provenance(gpu: str, runs: list[dict], points: pd.DataFrame) -> list[str]:
    first = runs[0]
    copy = ", ".join(f"{p['ceilings']['copy_tb_s']:.2f}" for p in runs)
    mm = ", ".join(f"{p['ceilings']['bf16_tflops']:.0f}" for p in runs)
    names = ", ".join(p["run"] for p in runs)
    text = (f"{first.get('gpu', '?')}, torch {first['torch']}, {len(runs)} runs ({names}) on "
            f"{first['date_utc'][:10]}; copy {copy} TB/s (read + written), bf16 product {mm} "
            "TFLOP/s, as measured in each run. Spread between runs, median (worst): "
            + ", ".join(f"{kind} {_pct(s)}" for kind, s
                        in points[points["runs"] > 1].groupby("kind")["spread"])
            + ".")
    kg = kernel_gpu(gpu)
    if kg is not None:
        text += (f" Database: aiconfigurator-core {package_version()}, {kg.system} vLLM "
                 f"{backend_version(kg.system, 'vllm')}; step models at TP 1 as the simulator "
                 "prices them (kernels: its tabulated form).")
    return textwrap.wrap(text, 100)


def decode_section(d: pd.DataFrame) -> list[str]:
    d = d.assign(bucket=d["batch"].map(timed.bucket),
                 engine_ms=d["gemm_ms"] + d["attention_ms"] + d["db_other_ms"])
    out = ["Decode step, a model's time over the timed one (median [min-max]). kernels: the "
           "simulator's", "kernels model (vLLM; SGLang's in timed_decode.csv); timed "
           "kernels: the timed GEMMs and", "attention with the database's rest (norms, "
           "activation: what an engine's fused kernels cost);", "db GEMMs: the database's "
           "over the timed, all layers.", "",
           "| batch | kernels | roofline | kernels / timed kernels | db GEMMs |",
           "|---|---|---|---|---|"]
    for _, _, name in timed.BUCKETS:
        s = d[d["bucket"] == name]
        out.append(f"| {name} | {_cell(s['kernels_vllm_ms'] / s['measured_ms'])} | "
                   f"{_cell(s['roofline_ms'] / s['measured_ms'])} | "
                   f"{_cell(s['kernels_vllm_ms'] / s['engine_ms'])} | "
                   f"{_cell(s['db_gemm_ms'] / s['gemm_ms'])} |")
    counts = ", ".join(str(int((d["bucket"] == name).sum())) for *_, name in timed.BUCKETS)
    out.append(f"(points per row: {counts})")
    share = d[["gemm_ms", "attention_ms", "other_ms"]].div(d["measured_ms"], axis=0).median()
    wide = d[d["batch"] * 8 >= 128]  # at least 128 (sequence, KV head) pairs to spread over
    text = (f"Split of the timed step (median share): GEMMs {share['gemm_ms']:.0%}, "
            f"attention {share['attention_ms']:.0%}, the rest {share['other_ms']:.0%}. "
            f"The rest (norms, rotary, activation, cache write, gaps between kernels) is "
            f"{d['other_ms'].min():.2f}-{d['other_ms'].max():.2f} ms timed against the "
            f"database's {d['db_other_ms'].min():.2f}-{d['db_other_ms'].max():.2f} ms (norms, "
            f"activation, embedding). Attention, db / timed: "
            f"{_cell(d['db_attention_ms'] / d['attention_ms'])}; where batch x KV heads >= 128: "
            f"{_cell(wide['db_attention_ms'] / wide['attention_ms'])} (n={len(wide)}). The "
            f"roofline over the timed kernels: {_cell(d['roofline_ms'] / d['engine_ms'])}.")
    out += ["", *textwrap.wrap(text, 100)]
    fused = d.dropna(subset=["compiled_ms"])
    if len(fused):
        out += ["", *textwrap.wrap(
            "With each layer compiled (torch.compile: norms, rotary and cache write fused), the "
            "timed step against the kernels model:", 100), "",
            "| model | batch | context | timed ms | compiled ms | kernels ms | kernels / "
            "compiled |", "|---|---|---|---|---|---|---|"]
        out += [f"| {r['model']} | {r['batch']} | {r['context']} | {r['measured_ms']:.2f} | "
                f"{r['compiled_ms']:.2f} | {r['kernels_vllm_ms']:.2f} | "
                f"{r['kernels_vllm_ms'] / r['compiled_ms']:.2f} |" for _, r in fused.iterrows()]
    return out


def prefill_section(p: pd.DataFrame) -> list[str]:
    out = ["Prefill of one prompt, each over the timed prefill:", "",
           "| model | context | timed ms | db / timed | kernels vllm | roofline | "
           "db attention / timed |", "|---|---|---|---|---|---|---|"]
    for _, r in p.iterrows():
        out.append(f"| {r['model']} | {r['context']} | {r['measured_ms']:.2f} | "
                   f"{r['db_ms'] / r['measured_ms']:.2f} | "
                   f"{r['kernels_vllm_ms'] / r['measured_ms']:.2f} | "
                   f"{r['roofline_ms'] / r['measured_ms']:.2f} | "
                   f"{r['db_attention_ms'] / r['attention_ms']:.2f} |")
    return out


def gemm_section(g: pd.DataFrame) -> list[str]:
    ratio = g["db_ms"] / g["measured_ms"]
    out = ["Each layer product (F.linear, bf16), database over timed, by tokens m:", "",
           "| m | products | db / timed |", "|---|---|---|"]
    for lo, hi, name in M_BUCKETS:
        sel = (g["m"] >= lo) & (g["m"] <= hi)
        out.append(f"| {name} | {int(sel.sum())} | {_cell(ratio[sel])} |")
    return out


def appendix_section(a: pd.DataFrame, optimum: pd.DataFrame) -> list[str]:
    out = ["PipelineRL's Fig. 8 product (4096 x h)(h x 16384), U(h) = FLOPs / (time x "
           "989 TFLOP/s):", "", "| h | timed | database |", "|---|---|---|"]
    for _, r in a.iterrows():
        db = f"{r['db_this_gpu']:.3f}" if pd.notna(r.get("db_this_gpu")) else "-"
        out.append(f"| {r['h']} | {r['measured_u']:.3f} | {db} |")
    for _, r in optimum.iterrows():
        out += ["", *textwrap.wrap(
            f"Appendix A's optimum with this timed U(h): speedup {r['speedup']:.2f}, g_max "
            f"{r['g_max']:.0f}, H {r['H']:.0f}, I {r['I']:.0f} (U(H) {r['U_H']:.3f}); the "
            "paper: 1.57, ~133, 192, 44.", 100)]
    return out


def figure(d: pd.DataFrame, path: Path) -> None:
    """Decode step against batch, a panel per (model, context)."""
    import matplotlib.pyplot as plt

    engines = sorted(set(zip(d["gpu"], d["model"], strict=True)))
    contexts = sorted(set(d["context"]))
    fig, axes = plt.subplots(len(engines), len(contexts), figsize=(10, 3.0 * len(engines)),
                             squeeze=False)
    lines = (("measured_ms", "timed step (torch, CUDA graph)", "black", "-"),
             ("engine_ms", "timed GEMMs + attention + db's rest", "gray", "--"),
             ("kernels_vllm_ms", "kernels model (vLLM)", "tab:blue", "-"),
             ("roofline_ms", "roofline model", "tab:red", "-"))
    d = d.assign(engine_ms=d["gemm_ms"] + d["attention_ms"] + d["db_other_ms"])
    for i, (gpu, model) in enumerate(engines):
        for j, ctx in enumerate(contexts):
            ax = axes[i][j]
            sub = d[(d["gpu"] == gpu) & (d["model"] == model) & (d["context"] == ctx)]
            for col, label, color, style in lines:
                ax.plot(sub["batch"], sub[col], style, color=color, lw=1.6, label=label)
            ax.set_xscale("log", base=2)
            ax.set_xticks([1, 4, 16, 64, 256], ["1", "4", "16", "64", "256"])
            ax.set_ylim(bottom=0)
            ax.set_title(f"{gpu}: {model}, context {ctx}", fontsize=9)
            ax.grid(alpha=0.3)
            if i == len(engines) - 1:
                ax.set_xlabel("batch (sequences)")
            if j == 0:
                ax.set_ylabel("decode step (ms)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Decode step, one GPU (TP 1): timed with torch against the step models",
                 fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)


def report(out: Path, root: Path = timed.ROOT) -> str:
    """Write timed_{decode,prefill,gemm,appendix_a}.csv and timed.png into OUT; the summary
    section as markdown, a part per GPU (a line saying so when nothing was timed)."""
    raw, prov = timed.load(root)
    if raw.empty:
        return f"No GPU timings under {root}/ (see docs/validation.md, \"Timing a GPU\").\n"
    points = timed.pooled(raw)
    parts = {"decode": timed.decode_rows(points), "prefill": timed.prefill_rows(points),
             "gemm": timed.gemm_rows(points), "appendix_a": timed.appendix_rows(points),
             "appendix_a_optimum": timed.appendix_optimum(points)}
    for name, frame in parts.items():
        frame.to_csv(out / f"timed_{name}.csv", index=False, float_format="%.6g")
    figure(parts["decode"], out / "timed.png")
    sections = []
    for gpu in dict.fromkeys(p["preset"] for p in prov):
        mine = {name: frame[frame["gpu"] == gpu] for name, frame in parts.items()}
        runs = [p for p in prov if p["preset"] == gpu]
        sections += [[f"### {gpu}"], _provenance(gpu, runs, points[points["gpu"] == gpu]),
                     decode_section(mine["decode"]),
                     prefill_section(mine["prefill"]), gemm_section(mine["gemm"]),
                     appendix_section(mine["appendix_a"], mine["appendix_a_optimum"])]
    return "\n\n".join("\n".join(s) for s in sections) + "\n"
