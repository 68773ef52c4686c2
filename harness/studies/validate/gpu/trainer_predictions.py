"""What the kernel-priced trainer predicts where no trainer was timed: each reproduction's
trainer beside today's MFU line, and verl's fully-async update_actor at 16, 32 and 64 H20s
(issue #35: verl's rows fit F + C / n, F about 69 s a 512-prompt window, C about 2,805
GPU-seconds). Nothing here is fitted; `trainer_bench` holds the fits and their errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness.core.sim_config import SimConfig
from harness.sim.presets import load_hardware, load_model
from harness.sim.trainer.layout import Layout
from harness.sim.trainer.step import KernelTrainModel, Passes


def pool_time(train: Any, lens: list[int], pool_tokens: int) -> float:
    """What SimTrainer charges: first-fit packing under `pool_tokens`, micro_time each."""
    micros: list[list[int]] = [[]]
    used = 0
    for n in lens:
        if micros[-1] and used + n > pool_tokens:
            micros.append([])
            used = 0
        micros[-1].append(n)
        used += n
    return sum(train.micro_time(m) for m in micros if m)


# Each reproduction's trainer: its calibration's [hardware] model and GPU, and the trainer
# GPUs its runs use (rolloutpipe/runs.py:44-45, pipelinerl/runs.py:65, rollpacker/runs.py:36
# (14B), april/runs.py:46 (colocated 2 x 4), verl_async/runs.py (16-64; 32 here)).
REPRODUCTIONS = {"rolloutpipe": 8, "pipelinerl": 80, "rollpacker": 32, "april": 8,
                 "verl-async": 32}


def reproductions(seq: int = 4096, sequences: int = 1024) -> pd.DataFrame:
    """Seconds to train `sequences` sequences of `seq` tokens (one old-log-prob forward)
    on each calibration's trainer GPU and model: today's MFU line against the kernels."""
    from harness.sim import calibration
    from harness.sim.perf import TrainModel
    from harness.sim.trainer import build as trainer_build
    from harness.sim.trainer.db import TrainerKernelError

    out = []
    for name, gpus in REPRODUCTIONS.items():
        data = calibration.load(name)
        hwt = data.get("hardware", {})
        gpu, model = str(hwt.get("trainer_gpu")), load_model(str(hwt.get("model")))
        hw = load_hardware(gpu)
        p = {**data.get("fixed", {}), **data.get("fit", {})}
        line = TrainModel.build(hw, model, gpus, float(p["train_mfu"]),
                                float(p.get("micro_overhead_s", 0.05)), forwards=1)
        lens = [seq] * sequences
        mfu_s = pool_time(line, lens, 16384) + line.optimizer_s
        sim = SimConfig(calibration=name, trainer_gpu=gpu, trainer_gpus=gpus,
                        log_prob_forwards=1, micro_batch_tokens=16384)
        try:  # on the calibration's own trainer GPU: its fitted train_scale, if any
            k = trainer_build.from_config(sim, data, hw, model, gpu, gpus)
            kern_s = pool_time(k, lens, trainer_build.pool_micro_tokens(k)) + k.optimizer_s
            note = trainer_build.framework_of(data)
        except TrainerKernelError as err:
            kern_s, note = float("nan"), str(err).split(": ", 1)[1]
        out.append({"calibration": name, "model": model.name, "trainer_gpu": gpu, "gpus": gpus,
                    "train_mfu": float(p["train_mfu"]),
                    "train_scale": float(p.get("train_scale", float("nan"))),
                    "mfu_line_s": round(mfu_s, 2),
                    "kernels_s": round(kern_s, 2), "kernels_over_line": round(kern_s / mfu_s, 2),
                    "framework / why not": note})
    return pd.DataFrame(out)


def spread_lengths(mean_response: float, prompts: int = 512, n: int = 16,
                   seed: int = 0) -> list[int]:
    """Sequence lengths (prompt + response) with the dapo-math-17k profile's shape
    (workloads/profiles/dapo-math-17k.toml: lognormal group medians, sigma 1.00 between
    prompts and 0.35 within a group; prompts lognormal around 150 tokens), responses
    capped at verl's 28k and scaled to `mean_response`."""
    rng = np.random.default_rng(seed)
    medians = np.exp(rng.normal(0.0, 1.00, prompts))
    raw = np.repeat(medians, n) * np.exp(rng.normal(0.0, 0.35, prompts * n))
    scale = mean_response / raw.mean()
    for _ in range(20):  # the cap takes some mean away: scale until it is back
        resp = np.clip(raw * scale, 64, 28 * 1024)
        scale *= mean_response / resp.mean()
    prompt = np.clip(np.exp(rng.normal(5.01, 0.35, prompts)), 60, 600)
    return [int(p + r) for p, r in zip(np.repeat(prompt, n), resp, strict=True)]


def verl_update_actor() -> pd.DataFrame:
    """verl's fully-async update_actor per 512-prompt window (x 16 responses, 16
    optimizer steps of 32 prompts) on H20, Qwen2.5-7B, FSDP2 with Ulysses SP 4 (priced as
    CP 4), dynamic batches of 61,440 tokens a GPU (x 4 per SP group), recompute, no
    old-log-prob forward; lengths spread as the dapo-math-17k profile spreads them, at the
    two means the verl-async calibration holds: 2,738 response tokens (fitted to gen) and
    1,127 (fitted to training at the neutral MFU). Beside it the issue's fit to verl's
    rows, F + C / n with F = 69 s and C = 2,805 GPU-seconds."""
    hw, model = load_hardware("h20"), load_model("qwen2.5-7b")
    readings = {"gen_2738": spread_lengths(2738), "train_1127": spread_lengths(1127)}
    rows = []
    for n in (16, 32, 64):
        layout = Layout(n, cp=4, fsdp=True, recompute=True)
        k = KernelTrainModel("h20", hw, model, layout, "fsdp",
                             passes=Passes(forwards=0, recompute=True), micro_tokens=61440 * 4)
        row: dict[str, float] = {"trainer_gpus": n}
        for name, lens in readings.items():
            pool = k.micro_tokens * layout.dp
            row[f"kernels_{name}_s"] = round(pool_time(k, lens, pool) + 16 * k.optimizer_s, 1)
            row[f"fixed_{name}_s"] = round(-(-sum(lens) // pool) * k.constants["fixed_s"], 1)
        row["verl_fit_s"] = round(69 + 2805 / n, 1)
        rows.append(row)
    return pd.DataFrame(rows)


def verl_needed_tflops(mean_response: int = 2738, prompt: int = 150) -> float:
    """The TFLOP/s a GPU that verl's C = 2,805 GPU-seconds a window implies for 6N a token
    alone (no attention, no recompute) at this mean length: above the H20's 148 the
    published update_actor cannot hold that length."""
    n = load_model("qwen2.5-7b").flops_per_token_forward
    return 3 * n * 8192 * (mean_response + prompt) / 2805 / 1e12
