"""Megatron training timed on an H100 beside the simulator's trainer model and the database.

Data: `measurements/h100-sxm/trainer/<run>/train.csv` and `provenance.json`, written on a lent
GPU by `on_gpu/train_measure.py` (Megatron-core 0.16.1, local spec, random weights).

The trainer model (`harness.sim.perf.TrainModel`) charges a micro-batch of sequences
    micro_overhead_s + (8 N tokens + attn_coeff * sum L^2) / (GPUs * peak * train_mfu)
with N the parameters (2N FLOPs per token forward, 6N forward and backward, 2N more for the
old-log-prob recompute) and attention 4 * layers * heads * head_dim * L^2 / 2 per sequence
forward. Its optimizer step is 16 bytes per parameter over the HBM bandwidth. Here:

- `mfu`: the MFU a row implies, its FLOPs under that rule over (time x the preset's peak,
  989.4 TFLOP/s dense bf16); `train_fwdbwd` rows count 6N + 3 x attention, `forward` rows
  2N + attention. N is what the rule would count: every parameter of the dense model (tied
  embedding once, as the preset's params_b) and, for the MoE, the active ones (every
  parameter less the unchosen experts': issue #27 §1, "FLOPs from active parameters").
  `mfu_matmul` leaves the input embedding out (a lookup, no FLOPs).
- `implied_train_mfu`: the `train_mfu` at which the model's 8N micro-batch time equals the
  measured forward-backward plus forward (micro_overhead_s = 0).
- `fit`: the measured (forward-backward + forward) against the rule's FLOPs over the
  micro-batches, least squares: the intercept is a fixed cost per micro-batch (the model's
  micro_overhead_s), the slope a marginal MFU.
- The experts' FFN (Qwen3-30B-A3B's: hidden 2048, expert FFN 768, 128 experts, top-8,
  balanced routing) against the database's `moe` table, bf16, TP 1, EP 1, per backend at its
  current version.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from harness.sim.presets import load_hardware

ROOT = Path("measurements") / "h100-sxm" / "trainer"
GPU = "h100-sxm"
DB_SYSTEM = "h100_sxm"
BACKENDS = ("vllm", "sglang", "trtllm")


def load(root: Path = ROOT) -> tuple[pd.DataFrame, dict[str, dict]]:
    """Every run's rows (with `run`), and each run's provenance by run name."""
    frames, info = [], {}
    for path in sorted(root.glob("*/train.csv")):
        frames.append(pd.read_csv(path).assign(run=path.parent.name))
        info[path.parent.name] = json.loads((path.parent / "provenance.json").read_text())
    if not frames:
        return pd.DataFrame(columns=["kind", "model", "run", "ms"]), info
    return pd.concat(frames, ignore_index=True), info


def shapes(info: dict[str, dict]) -> dict[str, dict]:
    """Each model's shape and counted parameters, from the newest run that built it."""
    out: dict[str, dict] = {}
    for run in sorted(info):
        for name, shape in info[run].get("shapes", {}).items():
            if "params" in shape:
                out[name] = shape
    return out


def counts(shape: dict) -> dict[str, float]:
    """Parameters the FLOPs rule counts (`rule`), those in matrix products per token
    (`matmul`), and all (`total`)."""
    total = float(shape["params"])
    expert = 3 * shape["hidden"] * shape["ffn"]  # gate, up, down of one expert
    unchosen = shape["layers"] * (shape["experts"] - shape["topk"]) * expert
    rule = total - unchosen if shape["experts"] else total
    embedding = 0.0 if shape["tied"] else shape["vocab"] * shape["hidden"]
    return {"total": total, "rule": rule, "matmul": rule - embedding}


def attention_forward(shape: dict, batch: int, seq: int) -> float:
    """Causal attention FLOPs of `batch` sequences of `seq` tokens, forward (the model's)."""
    return 4.0 * shape["layers"] * shape["heads"] * shape["head_dim"] * 0.5 * seq ** 2 * batch


def flops(shape: dict, kind: str, batch: int, seq: int, which: str = "rule") -> float:
    n = counts(shape)[which]
    passes = {"train_fwdbwd": 3, "forward": 1, "sim_8n": 4}[kind]
    return 2.0 * passes * n * batch * seq + passes * attention_forward(shape, batch, seq)


def peak_flops() -> float:
    return load_hardware(GPU).bf16_tflops * 1e12


def mfu_rows(raw: pd.DataFrame, info: dict[str, dict]) -> pd.DataFrame:
    """Per run, model and micro-batch: fwd+bwd and forward times, ms per 1k tokens, MFUs."""
    known = shapes(info)
    rows = raw[raw["kind"].isin(["train_fwdbwd", "forward"]) & raw["ms"].notna()
               & raw["model"].isin(known)]
    out = []
    for r in rows.itertuples():
        shape, b, s = known[r.model], int(r.batch), int(r.seq)
        secs = r.ms * 1e-3
        out.append({"run": r.run, "model": r.model, "kind": r.kind, "batch": b, "seq": s,
                    "tokens": b * s, "ms": r.ms, "ms_p10": r.ms_p10, "ms_p90": r.ms_p90,
                    "ms_per_1k_tokens": r.ms / (b * s) * 1e3,
                    "mfu": flops(shape, r.kind, b, s) / (secs * peak_flops()),
                    "mfu_matmul": flops(shape, r.kind, b, s, "matmul") / (secs * peak_flops())})
    return pd.DataFrame(out)


def implied_train_mfu(table: pd.DataFrame, info: dict[str, dict]) -> pd.DataFrame:
    """The model's train_mfu that reproduces fwd+bwd + forward per micro-batch (runs pooled
    by median), and the fitted fixed cost per micro-batch and marginal MFU per model."""
    known = shapes(info)
    med = table.groupby(["model", "kind", "batch", "seq"])["ms"].median().unstack("kind")
    med = med.dropna().reset_index()
    med["sim_flops"] = [flops(known[m], "sim_8n", b, s)
                        for m, b, s in zip(med["model"], med["batch"], med["seq"], strict=True)]
    med["both_ms"] = med["train_fwdbwd"] + med["forward"]
    med["implied_train_mfu"] = med["sim_flops"] / (med["both_ms"] * 1e-3 * peak_flops())
    return med


def fit(med: pd.DataFrame) -> pd.DataFrame:
    """Least squares of (fwd+bwd + forward) seconds on the rule's FLOPs, per model."""
    out = []
    for model, g in med.groupby("model"):
        slope, intercept = np.polyfit(g["sim_flops"], g["both_ms"] * 1e-3, 1)
        out.append({"model": model, "micro_overhead_s": intercept,
                    "marginal_mfu": 1.0 / (slope * peak_flops()) if slope > 0 else float("nan"),
                    "points": len(g)})
    return pd.DataFrame(out)


def optimizer_rows(raw: pd.DataFrame, info: dict[str, dict]) -> pd.DataFrame:
    """Measured Adam step against the model's 16 bytes per parameter over HBM bandwidth."""
    known, hw = shapes(info), load_hardware(GPU)
    rows = raw[(raw["kind"] == "optimizer") & raw["ms"].notna()]
    out = []
    for model, g in rows.groupby("model"):
        model_ms = 16 * counts(known[model])["total"] / (hw.hbm_bandwidth_gbs * 1e9) * 1e3
        out.append({"model": model, "ms": g["ms"].median(), "ms_min": g["ms"].min(),
                    "ms_max": g["ms"].max(), "runs": len(g), "model_ms": model_ms,
                    "measured_over_model": g["ms"].median() / model_ms})
    return pd.DataFrame(out)


def busy_rows(raw: pd.DataFrame) -> pd.DataFrame:
    """The GPU's kernel time inside a step over the step's median time (same run)."""
    busy = raw[raw["kind"] == "gpu_busy"]
    steps = raw[raw["kind"] == "train_fwdbwd"]
    out = []
    for r in busy.itertuples():
        same = steps[(steps["run"] == r.run) & (steps["model"] == r.model)
                     & (steps["batch"] == r.batch) & (steps["seq"] == r.seq)]
        if not same.empty:
            out.append({"run": r.run, "model": r.model, "tokens": int(r.tokens),
                        "busy_ms": r.ms, "step_ms": float(same["ms"].iloc[0]),
                        "busy_share": r.ms / float(same["ms"].iloc[0]), "kernels": r.note})
    return pd.DataFrame(out)


def database_moe(backend: str, hidden: int = 2048, inter: int = 768, experts: int = 128,
                 topk: int = 8) -> pd.DataFrame:
    """The database's bf16 MoE latency (ms) by num_tokens: TP 1, EP 1, balanced routing,
    `backend` at its current version for h100_sxm."""
    import aiconfigurator_core

    from harness.sim.kernels.estimator import backend_version

    version = backend_version(DB_SYSTEM, backend)
    path = (Path(aiconfigurator_core.__file__).parent / "systems" / "data" / DB_SYSTEM / "moe"
            / backend / str(version) / "moe_perf.parquet")
    if version is None or not path.exists():
        return pd.DataFrame(columns=["num_tokens", "latency", "backend"])
    df = pd.read_parquet(path)
    df = df[(df["hidden_size"] == hidden) & (df["inter_size"] == inter)
            & (df["num_experts"] == experts) & (df["topk"] == topk)
            & (df["moe_dtype"] == "bfloat16") & (df["moe_tp_size"] == 1)
            & (df["moe_ep_size"] == 1) & (df["distribution"] == "balanced")]
    return df[["num_tokens", "latency"]].assign(backend=f"{backend} {version}")


def experts_median(raw: pd.DataFrame) -> pd.DataFrame:
    """Each variant's time per tokens: the median of the runs' medians, the lowest 10th and
    highest 90th percentile of any run, and the number of runs."""
    moe = raw[(raw["kind"] == "moe_ffn") & raw["ms"].notna()]
    med = moe.groupby(["name", "tokens"]).agg(ms=("ms", "median"), ms_p10=("ms_p10", "min"),
                                              ms_p90=("ms_p90", "max"), runs=("run", "nunique"))
    return med.reset_index()


def experts_rows(raw: pd.DataFrame) -> pd.DataFrame:
    """Measured forward experts' FFN over each backend's database latency at the same
    tokens. The table times forward passes only: `grouped_fwdbwd` is left out here."""
    med = experts_median(raw)
    med = med[med["name"] != "grouped_fwdbwd"]
    out = []
    for backend in BACKENDS:
        db = database_moe(backend)
        joined = med.merge(db, left_on="tokens", right_on="num_tokens")
        joined["measured_over_db"] = joined["ms"] / joined["latency"]
        out.append(joined.drop(columns="num_tokens").rename(columns={"latency": "db_ms"}))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def backward_ratio(raw: pd.DataFrame) -> pd.DataFrame:
    """grouped_fwdbwd over grouped per tokens (the products alone would give 3)."""
    med = experts_median(raw).pivot(index="tokens", columns="name", values="ms")
    if not {"grouped", "grouped_fwdbwd"} <= set(med.columns):
        return pd.DataFrame()
    return (med["grouped_fwdbwd"] / med["grouped"]).rename("fwdbwd_over_forward").reset_index()


def report(root: Path = ROOT) -> str:
    """The comparison as markdown tables."""
    raw, info = load(root)
    if raw.empty:
        return "No trainer measurements under " + str(root) + "\n"
    table = mfu_rows(raw, info)
    med = implied_train_mfu(table, info)
    runs = ", ".join(f"{r} ({info[r].get('commit', '')})" for r in sorted(info))
    parts = ["# Megatron training on an H100 against the trainer model\n",
             f"Runs: {runs}; peak {peak_flops() / 1e12:.1f} TFLOP/s.\n",
             "## Per micro-batch (median over runs)\n",
             table.groupby(["model", "kind", "tokens", "seq"])[
                 ["ms", "ms_per_1k_tokens", "mfu", "mfu_matmul"]].median()
             .round(4).to_markdown(),
             "\n## The model's train_mfu these imply (fwd+bwd + forward, 8N rule)\n",
             med.round(4).to_markdown(index=False),
             "\n## Fixed cost per micro-batch and marginal MFU (least squares)\n",
             fit(med).round(4).to_markdown(index=False),
             "\n## Optimizer step\n", optimizer_rows(raw, info).round(3).to_markdown(index=False),
             "\n## GPU kernel time inside a step\n",
             busy_rows(raw).round(3).to_markdown(index=False),
             "\n## Experts' FFN (forward) against the database\n",
             experts_rows(raw).round(3).to_markdown(index=False),
             "\n## Experts' FFN forward-backward over the routed forward\n",
             backward_ratio(raw).round(3).to_markdown(index=False), ""]
    return "\n".join(parts)


def summary(out: Path, root: Path = ROOT, more_report: str = "",
            more_lines: list[str] | None = None) -> str:
    """`validate gpu`'s fifth check: every table to OUT/trainer_check.md, and for the summary
    one row per model (the train_mfu its micro-batches imply, the fitted fixed cost and
    marginal MFU, the optimizer step against the model) and the experts' ratios to the
    database. Reads the stored measurements only: no GPU is needed. `more_report` and
    `more_lines` (the kernel-priced trainer's check, `trainer_bench`, which reads this
    module) go after the file's tables and after the summary's."""
    from harness.core.files import write_atomic

    text = report(root) + ("\n" + more_report if more_report else "")
    write_atomic(out / "trainer_check.md", text)
    raw, info = load(root)
    if raw.empty:
        return text
    med = implied_train_mfu(mfu_rows(raw, info), info)
    fitted, opt = fit(med).set_index("model"), optimizer_rows(raw, info).set_index("model")
    layers = {name: shape["layers"] for name, shape in shapes(info).items()}
    lines = [f"Megatron-core on one H100, random weights ({', '.join(sorted(info))}); every "
             "table in", "trainer_check.md.\n",
             "| model | implied train_mfu | fixed s/micro-batch | marginal MFU | optimizer ms "
             "(model) |", "|---|---|---|---|---|"]
    med["tokens"] = med["batch"] * med["seq"]
    for model, g in med.groupby("model"):
        step = (f"{opt.loc[model, 'ms']:.1f} ({opt.loc[model, 'model_ms']:.1f})"
                if model in opt.index else "")
        lines.append(f"| {model} ({layers[model]} layers) | {g['implied_train_mfu'].min():.3f}-"
                     f"{g['implied_train_mfu'].max():.3f} ({g['tokens'].min() // 1024}k-"
                     f"{g['tokens'].max() // 1024}k tokens) | "
                     f"{fitted.loc[model, 'micro_overhead_s']:.3f} | "
                     f"{fitted.loc[model, 'marginal_mfu']:.3f} | {step} |")
    experts = experts_rows(raw)
    if not experts.empty:
        lines += ["", "Experts' FFN forward (Qwen3-30B-A3B's shape) over the database's MoE "
                  "table", f"({', '.join(experts['backend'].unique())}), median (range) over "
                  "tokens and backends:", ""]
        for name, g in experts.groupby("name"):
            r = g["measured_over_db"]
            lines.append(f"- {name}: {r.median():.2f} ({r.min():.2f}-{r.max():.2f})")
    lines += more_lines or []
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(report())
