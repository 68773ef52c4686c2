"""APRIL's setup and its simulated runs: 24 configurations and their steady state.

Setup as in the paper: 8 AMD MI300X colocated (8 SGLang engines, TP=1),
Qwen3-4B and Qwen3-8B, rollout batch 32 prompts x 8 samples, over-sampling
64, max response 16384, one optimizer step of 256 samples per rollout.
Baselines: GRPO is the standard synchronous rollout (32 groups, wait for all);
DAPO's baseline over-samples 64 groups for dynamic sampling and discards what
is left when 32 valid groups are done (slime without `--partial-rollout`).
APRIL keeps and resumes those partial responses. `steady` averages the rounds
after the two warm-up rounds, which is what every claim and figure reads.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.config import RunConfig
from harness.studies.reproduce.grid import COLUMNS, run_configs

PAPER = "april"
DATASETS = ("dapo-math-17k", "deepscaler", "deepmath-103k")
MODELS = ("qwen3-4b", "qwen3-8b")
ALGOS = ("grpo", "dapo")
ROUNDS, WARMUP = 8, 2


def config(algo: str, model: str, dataset: str, april: bool, seed: int, rounds: int,
           calibration: str = PAPER) -> RunConfig:
    dapo = algo == "dapo"
    cfg = RunConfig(system="april", workload=dataset, seed=seed, rounds=rounds, groups=32,
                    update_groups=32, group_size=8, max_response_tokens=16384,
                    over_sampling_groups=64 if (april or dapo) else 0,
                    partial_rollout=april, dynamic_sampling=dapo)
    s = cfg.sim
    s.calibration, s.model, s.rollout_gpu, s.rollout_tp = calibration, model, "mi300x", 1
    s.rollout_engines, s.placement = 8, "colocated"
    s.engine_backend = "sglang"  # APRIL is built into slime, on SGLang
    return cfg


def simulate(seed: int = 0, rounds: int = ROUNDS, progress: bool = True,
             calibration: str = PAPER, algos: tuple[str, ...] = ALGOS,
             modes: tuple[bool, ...] = (False, True),
             overrides: dict[str, float] | None = None) -> pd.DataFrame:
    cells, tasks = [], []  # all runs at once (side by side in `reproduce`'s pool)
    for algo in algos:
        for model in MODELS:
            for april in modes:
                label = f"APRIL {algo} {model} {'april' if april else 'baseline'}"
                folder = Path("runs") / PAPER / label.replace(" ", "-")
                folder.mkdir(parents=True, exist_ok=True)
                cells.append((algo, model, "april" if april else "baseline"))
                for dataset in DATASETS:
                    cfg = config(algo, model, dataset, april, seed, rounds, calibration)
                    for key, value in (overrides or {}).items():
                        setattr(cfg.sim, key, value)
                    tasks.append((cfg.validate(), folder / f"{dataset}.jsonl"))
    runs = run_configs(tasks, "APRIL", progress)
    frames, n = [], len(DATASETS)  # one frame per cell, as a grid over the datasets gives
    for i, (algo, model, method) in enumerate(cells):
        rows = [{"groups": cfg.groups, **row} for (cfg, _), run in
                zip(tasks[i * n:(i + 1) * n], runs[i * n:(i + 1) * n], strict=True) for row in run]
        frames.append(pd.DataFrame(rows)[COLUMNS].assign(algo=algo, model=model, method=method))
    return pd.concat(frames, ignore_index=True)


def steady(df: pd.DataFrame) -> pd.DataFrame:
    """Means over the steady-state rounds per (algo, model, dataset, method)."""
    keep = df[df["round"] >= WARMUP]
    return keep.groupby(["algo", "model", "workload", "method"]).agg(
        throughput=("batch_tokens_per_s", "mean"),
        generated=("rollout_tokens_per_s", "mean"),
        carried=("offpolicy_token_frac", "mean"),
        versions=("versions_per_sample_max", "max"),
    )
