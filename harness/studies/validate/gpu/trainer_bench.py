"""The kernel-priced trainer (`harness.sim.trainer`) against measured training steps.

Two sources: the project's Megatron-core runs on one H100 (measurements/h100-sxm/trainer,
read by `trainer_check`) and prime-rl's published trainer benchmarks
(measurements/published/prime_rl_trainer.csv, PrimeIntellect-ai/prime-rl@559b447:
benchmarks/results/BENCHMARKS.md). prime-rl's benchmark script at that commit
(benchmarks/scripts/run_single_benchmark.py) runs FSDP2 over every GPU (`torchrun
--nproc-per-node`), `--model.compile`, 2 micro-batches a GPU (`micro_batches`, batch size
micro_batches x GPUs) each ONE sequence of `seq_len` tokens (the fake RL loader packs one
sequence: src/prime_rl/trainer/rl/data.py:132-152, `generate_samples` False by default),
logprobs from the engine (no recompute forward), `--model.ac` for Recompute (full
activation checkpointing), activation offloading for Offload (priced as no recompute).
Its throughput counts every GPU's tokens over the step's time, so one micro-batch per GPU
takes seq_len x GPUs / TPS seconds, which includes half the optimizer step.

DECLARED before any error was looked at (`FIT_ROWS`): Megatron's constants are fitted on
the dense Qwen3-1.7B rows of the H100 runs (its MoE rows are held out); FSDP's on the four
full-fine-tuning RL rows of Qwen3-0.6B (1 GPU) and Qwen3-4B (8 GPUs) on H100 at 16k and 64k.
Every other row is held out and reported beside them.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from harness.sim.presets import Model, load_hardware, load_model
from harness.sim.trainer.layout import Layout
from harness.sim.trainer.step import KernelTrainModel, Passes
from harness.studies.validate.gpu import trainer_check

CSV = Path("measurements") / "published" / "prime_rl_trainer.csv"
# (model, kind, lora, seq_len, ac, gpus, hardware): declared, see the module's docstring.
FIT_ROWS = {
    ("Qwen/Qwen3-0.6B", "rl", "", 16384, "Recompute", 1, "H100 HBM3"),
    ("Qwen/Qwen3-0.6B", "rl", "", 65536, "Recompute", 1, "H100 HBM3"),
    ("Qwen/Qwen3-4B-Instruct-2507", "rl", "", 16384, "Recompute", 8, "H100 HBM3"),
    ("Qwen/Qwen3-4B-Instruct-2507", "rl", "", 65536, "Recompute", 8, "H100 HBM3"),
}
MEGATRON_FIT_MODELS = ("qwen3-1.7b",)  # measurements/h100-sxm/trainer: dense rows only
GPUS = {"H100 HBM3": "h100-sxm", "H200": "h200-sxm", "B200": "b200-sxm"}
MODELS = {"Qwen/Qwen3-4B-Instruct-2507": "qwen3-4b",
          "Qwen/Qwen3-30B-A3B-Instruct-2507": "qwen3-30b-a3b",
          "Qwen/Qwen3-235B-A22B-Instruct-2507": "qwen3-235b-a22b"}
MICRO_BATCHES = 2  # run_single_benchmark.py's default `micro_batches`


@cache
def model_of(name: str) -> Model | None:
    """A published row's model: a preset, or the database's bundled config.json."""
    if name in MODELS:
        return load_model(MODELS[name])
    import aiconfigurator_core

    path = (Path(aiconfigurator_core.__file__).parent / "model_configs"
            / f"{name.replace('/', '--')}_config.json")
    return load_model(str(path)) if path.exists() else None


def published(path: Path = CSV) -> pd.DataFrame:
    """prime-rl's rows with the measured seconds per micro-batch and the declared split."""
    df = pd.read_csv(path, dtype={"lora_rank": str}).fillna({"lora_rank": ""})
    df["measured_s"] = df["seq_len"] * df["gpus"] / (df["tps_k"] * 1e3)
    df["fit"] = [(r.model, r.kind, r.lora_rank, r.seq_len, r.ac, r.gpus, r.hardware) in FIT_ROWS
                 for r in df.itertuples()]
    return df


def why_not(row: pd.Series) -> str:
    """Why a row cannot be priced ('' when it can)."""
    if row["hardware"] not in GPUS:
        return f"no GPU preset or kernels for {row['hardware']}"
    if model_of(row["model"]) is None:
        return "no model config"
    return ""


def prime_model(row: pd.Series, fitted: tuple[float, float, float] | None = None
                ) -> KernelTrainModel:
    gpu = GPUS[row["hardware"]]
    model = model_of(row["model"])
    assert model is not None
    layout = Layout(int(row["gpus"]), ep=int(row["ep"]), cp=int(row["cp"]), fsdp=True,
                    recompute=row["ac"] == "Recompute")
    passes = Passes(forwards=0, recompute=layout.recompute, weight_grads=not row["lora_rank"])
    return KernelTrainModel(gpu, load_hardware(gpu), model, layout, "fsdp", passes=passes,
                            micro_tokens=int(row["seq_len"]), fitted=fitted)


def predict(row: pd.Series, fitted: tuple[float, float, float] | None = None) -> float:
    """Seconds per micro-batch per GPU as the benchmark counts it (half the optimizer)."""
    k = prime_model(row, fitted)
    return k.micro_time([int(row["seq_len"])] * int(row["gpus"])) + (
        k.optimizer_s / MICRO_BATCHES)


def fit_fsdp(df: pd.DataFrame) -> tuple[float, float]:
    """(fixed_s, scale) minimising the log error on the declared FSDP rows."""
    rows = [r for _, r in df[df["fit"]].iterrows()]

    def residuals(x: np.ndarray) -> list[float]:
        return [math.log(predict(r, (x[0], x[1], 0.0)) / r["measured_s"]) for r in rows]

    sol = least_squares(residuals, x0=[0.1, 1.5], bounds=([0.0, 0.5], [5.0, 10.0]))
    return float(sol.x[0]), float(sol.x[1])


def megatron_rows(root: Path = trainer_check.ROOT) -> pd.DataFrame:
    """The H100 runs' forward-backward and forward medians per model and shape."""
    raw, info = trainer_check.load(root)
    table = trainer_check.mfu_rows(raw, info)
    med = table.groupby(["model", "kind", "batch", "seq"])["ms"].median().reset_index()
    med["measured_s"] = med["ms"] / 1e3
    med["fit"] = med["model"].isin(MEGATRON_FIT_MODELS)
    return med


def megatron_model(name: str, fitted: tuple[float, float, float] | None = None
                   ) -> KernelTrainModel:
    """One H100, TP = PP = EP = 1, Megatron's DDP (no FSDP), no recompute, no extra
    forward: train_measure.py's setup (the MoE measured with its 3 layers)."""
    model = load_model(name)
    if name == "qwen3-30b-a3b":
        model = replace(model, layers=3)
    return KernelTrainModel("h100-sxm", load_hardware("h100-sxm"), model,
                            Layout(1, fsdp=False), "megatron", passes=Passes(forwards=0),
                            micro_tokens=1 << 20, fitted=fitted)


def megatron_predict(row: pd.Series, fitted: tuple[float, float, float] | None = None
                     ) -> float:
    k = megatron_model(row["model"], fitted)
    lens = [int(row["seq"])] * int(row["batch"])
    return k.forward_time(lens) if row["kind"] == "forward" else k.micro_time(lens)


def fit_megatron(med: pd.DataFrame) -> tuple[float, float, float]:
    """(fixed_s, scale) on the declared forward-backward rows, then forward_fixed_s on
    the same models' forward rows at that scale (least squares in seconds)."""
    fb = [r for _, r in med[med["fit"] & (med["kind"] == "train_fwdbwd")].iterrows()]
    kern = np.array([megatron_predict(r, (0.0, 1.0, 0.0)) for r in fb])
    meas = np.array([r["measured_s"] for r in fb])
    scale, fixed = np.polyfit(kern, meas, 1)
    fw = [r for _, r in med[med["fit"] & (med["kind"] == "forward")].iterrows()]
    kf = np.array([megatron_predict(r, (0.0, 1.0, 0.0)) for r in fw])
    mf = np.array([r["measured_s"] for r in fw])
    forward_fixed = float(np.mean(mf - scale * kf))
    return float(fixed), float(scale), forward_fixed


def fitted_constants() -> dict[str, tuple[float, float, float]]:
    """Each framework's constants refitted from the measurements (constants.py holds them
    rounded; tests/test_trainer_fit.py checks the two agree). FSDP's forward-only fixed
    cost takes Megatron's ratio of forward to forward-backward fixed costs."""
    meg = fit_megatron(megatron_rows())
    fixed, scale = fit_fsdp(published())
    return {"megatron": meg, "fsdp": (fixed, scale, fixed * meg[2] / meg[0])}


def line_predict(row: pd.Series) -> float:
    """Today's default for the same row: the MFU line at the neutral prior for its
    framework and GPU class (presets/trainer_mfu.toml: 0.30 on NVLink GPUs) with the
    default calibration's 0.05 s a micro-batch; 6N + attention a token (no old-log-prob
    forward, as prime-rl runs), half the optimizer step."""
    from harness.sim.perf import TrainModel

    gpu = GPUS[row["hardware"]]
    model = model_of(row["model"])
    assert model is not None
    line = TrainModel.build(load_hardware(gpu), model, int(row["gpus"]), 0.30, 0.05,
                            forwards=0)
    return line.micro_time([int(row["seq_len"])] * int(row["gpus"])) + (
        line.optimizer_s / MICRO_BATCHES)


def errors() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every row with its prediction (the constants in constants.py) and error."""
    df = published()
    df["why_not"] = [why_not(r) for _, r in df.iterrows()]
    ok = df["why_not"] == ""
    df["predicted_s"] = [predict(r) if good else float("nan")
                         for (_, r), good in zip(df.iterrows(), ok, strict=True)]
    df["error_pct"] = 100 * (df["predicted_s"] / df["measured_s"] - 1)
    df["mfu_line_s"] = [line_predict(r) if good else float("nan")
                        for (_, r), good in zip(df.iterrows(), ok, strict=True)]
    df["line_error_pct"] = 100 * (df["mfu_line_s"] / df["measured_s"] - 1)
    med = megatron_rows()
    med["predicted_s"] = [megatron_predict(r) for _, r in med.iterrows()]
    med["error_pct"] = 100 * (med["predicted_s"] / med["measured_s"] - 1)
    return df, med


def split_summary(rows: pd.DataFrame, group: str) -> pd.DataFrame:
    """Median and mean absolute error per group, fitted and held-out side by side."""
    rows = rows[rows["error_pct"].notna()].copy()
    rows["abs"] = rows["error_pct"].abs()
    rows["split"] = np.where(rows["fit"], "fitted", "held out")
    out = rows.groupby([group, "split"])["abs"].agg(["count", "median", "mean", "max"])
    return out.round(1).reset_index()


def _table(df: pd.DataFrame) -> str:
    return df.to_markdown(index=False, floatfmt="g")


def report() -> str:
    """The kernel-priced trainer against both sources, as markdown (trainer_check.md)."""
    from harness.sim.trainer import constants
    from harness.studies.validate.gpu import trainer_predictions as predictions

    need_gen, need_train = predictions.verl_needed_tflops(), predictions.verl_needed_tflops(1127)

    pub, meg = errors()
    priced = pub[pub["why_not"] == ""].copy()
    priced["model"] = priced["model"].str.split("/").str[1]
    cols = ["model", "kind", "lora_rank", "seq_len", "ac", "attn", "gpus", "hardware",
            "mfu_pct", "measured_s", "predicted_s", "error_pct", "fit", "mfu_line_s",
            "line_error_pct"]
    versus = priced.assign(kernels=priced["error_pct"].abs(),
                           line=priced["line_error_pct"].abs()).groupby("hardware")[
        ["kernels", "line"]].median().round(1).reset_index()
    left = pub[pub["why_not"] != ""].groupby("why_not").size().rename("rows").reset_index()
    consts = pd.DataFrame([{"framework": k, **v} for k, v in constants.FRAMEWORKS.items()
                           if k != "deepspeed"])
    meg_cols = ["model", "kind", "batch", "seq", "measured_s", "predicted_s", "error_pct",
                "fit"]
    parts = [
        "# The kernel-priced trainer (sim.train_model=kernels) against measured steps\n",
        "`harness/sim/trainer` prices a micro-batch from aiconfigurator-core's measured "
        "kernels (vLLM's gemm, context-attention and moe tables, NCCL's comm table) and the "
        "layout; `harness/studies/validate/gpu/trainer_bench.py` holds the declared fit "
        "rows (FIT_ROWS, MEGATRON_FIT_MODELS), chosen before any error was looked at.\n",
        "## Constants (constants.py; fitted on the declared rows only)\n", _table(consts),
        f"\nAdam: {constants.ADAM_OVER_BYTES}x its 16 bytes a parameter over HBM (the H100 "
        f"runs' mean); attention backward {constants.ATTENTION_BACKWARD_OVER_FORWARD}x its "
        "forward.\n",
        "## Errors: fitted and held out side by side (absolute %, per micro-batch)\n",
        "prime-rl (FSDP2), by GPU:\n", _table(split_summary(priced, "hardware")),
        "\nprime-rl, by kind (rl full, rl LoRA, sft):\n",
        _table(split_summary(priced.assign(
            what=priced["kind"] + np.where(priced["lora_rank"] != "", " lora", " full")),
            "what")),
        "\nThe same prime-rl rows under today's default, the MFU line (neutral prior 0.30, "
        "0.05 s a micro-batch: no fit to any of them), median |error| % by GPU:\n",
        _table(versus),
        "\nMegatron on one H100 (the project's runs), by model:\n",
        _table(split_summary(meg, "model")),
        "\n## prime-rl's rows (PrimeIntellect-ai/prime-rl@559b447:benchmarks/results/"
        "BENCHMARKS.md; measurements/published/prime_rl_trainer.csv)\n",
        "measured_s = seq_len x GPUs / TPS: one micro-batch of one sequence a GPU, with half "
        "the optimizer step (2 micro-batches a step).\n",
        _table(priced[cols].round(2)), "\nRows not priced:\n", _table(left),
        "\n## Megatron-core on one H100 (measurements/h100-sxm/trainer)\n",
        _table(meg[meg_cols].round(3)),
        "\n## Each reproduction's trainer: the MFU line (today's default) against kernels\n",
        "1,024 sequences of 4,096 tokens with an old-log-prob forward on the reproduction's "
        "trainer GPUs, 16k tokens a micro-batch (a replica's, under kernels), plus one "
        "optimizer step; the calibration's train_mfu and micro_overhead_s for the line.\n",
        _table(predictions.reproductions()),
        "\n## verl's fully-async update_actor per 512-prompt window (Qwen2.5-7B, H20)\n",
        _table(predictions.verl_update_actor()),
        f"\nverl's C = 2,805 GPU-seconds a window needs {need_gen:.0f} TFLOP/s a "
        f"GPU for 6N a token alone at the gen-fitted mean (2,738 + 150 tokens), "
        f"{need_train:.0f} at 1,127: the H20's dense BF16 peak is 148, so "
        "the published update_actor cannot hold the gen-fitted length, and the kernels, "
        "which price what the GPU can do, land several times above it there. The kernels' "
        "fixed part shrinks with GPUs (it is per micro-batch, and each GPU runs fewer), so "
        "the model has no F of about 69 s a window: what verl's constant is (per-step host "
        "work, the FSDP gathers' latency across nodes, the dynamic batch's imbalance) is "
        "not measured here.\n"]
    return "\n".join(parts)


def summary_lines() -> list[str]:
    """For `validate gpu`'s summary: held-out and fitted error per source."""
    pub, meg = errors()
    priced = pub[pub["why_not"] == ""]
    lines = ["", "Kernel-priced trainer (sim.train_model=kernels), |error| % per micro-batch:",
             "", "| source | fitted rows, median | held-out rows, median (mean) |",
             "|---|---|---|"]
    for name, rows in (("prime-rl (FSDP2)", priced), ("Megatron H100", meg)):
        err = rows["error_pct"].abs()
        fit, held = err[rows["fit"]], err[~rows["fit"]]
        lines.append(f"| {name} | {len(fit)}, {fit.median():.1f} | {len(held)}, "
                     f"{held.median():.1f} ({held.mean():.1f}) |")
    line = priced["line_error_pct"].abs()
    lines += ["", f"Today's MFU line (0.30, 0.05 s a micro-batch, fitted to none of them) on "
              f"the same {len(line)}", f"prime-rl rows: median {line.median():.1f}%, "
              f"mean {line.mean():.1f}%."]
    return lines
