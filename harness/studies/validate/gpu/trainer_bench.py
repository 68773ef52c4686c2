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


def errors() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every row with its prediction (the constants in constants.py) and error."""
    df = published()
    df["why_not"] = [why_not(r) for _, r in df.iterrows()]
    ok = df["why_not"] == ""
    df["predicted_s"] = [predict(r) if good else float("nan")
                         for (_, r), good in zip(df.iterrows(), ok, strict=True)]
    df["error_pct"] = 100 * (df["predicted_s"] / df["measured_s"] - 1)
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
