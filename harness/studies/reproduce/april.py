"""APRIL (active partial rollouts): Table 1's throughput gains, carried-over tokens, versions.

Setup as in the paper: 8 AMD MI300X colocated (8 SGLang engines, TP=1),
Qwen3-4B and Qwen3-8B, rollout batch 32 prompts x 8 samples, over-sampling
64, max response 16384, one optimizer step of 256 samples per rollout.
Baselines: GRPO is the standard synchronous rollout (32 groups, wait for all);
DAPO's baseline over-samples 64 groups for dynamic sampling and discards what
is left when 32 valid groups are done (slime without `--partial-rollout`).
APRIL keeps and resumes those partial responses. Rollout throughput is what
slime logs and the paper reports: the response lengths of the samples a rollout
returns for training (resumed prefixes included) over its wall time
(`batch_tokens_per_s`), averaged over the steady-state rounds (the first two
are warm-up). The paper's text defines it as the tokens *generated* in the
rollout iteration over its wall time (`rollout_tokens_per_s`: resumed prefixes
were generated in earlier rounds and do not count; aborted and discarded work
does); the gain under that definition is a second row per cell.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.config import RunConfig
from harness.core.files import write_atomic
from harness.core.plots import save_figure
from harness.studies.claims import Claim
from harness.studies.reproduce.grid import COLUMNS, run_configs

PAPER = "april"
DATASETS = ("dapo-math-17k", "deepscaler", "deepmath-103k")
MODELS = ("qwen3-4b", "qwen3-8b")
ALGOS = ("grpo", "dapo")
ROUNDS, WARMUP = 8, 2
# Table 1: rollout throughput (tokens/s on 8 GPUs), (baseline, APRIL).
TABLE1 = {
    ("grpo", "qwen3-4b"): ((9814, 12210), (9252, 12183), (9459, 13027)),
    ("grpo", "qwen3-8b"): ((8780, 11096), (8031, 10821), (7756, 11594)),
    ("dapo", "qwen3-4b"): ((12572, 13698), (12257, 13916), (13038, 14318)),
    ("dapo", "qwen3-8b"): ((11419, 12407), (11470, 12439), (11860, 13075)),
}
MEAN_GAIN_PCT = 22.5
CARRIED_SHARE_PCT = 40.0
MAX_VERSIONS = 5


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


GENERATED = " (tokens generated in the round)"  # the claims under the paper's text definition


def gains(m: pd.DataFrame, algo: str, model: str, dataset: str) -> tuple[float, float]:
    """APRIL's throughput gain over the baseline in %, as slime logs throughput
    (returned samples' tokens) and as the paper's text defines it (generated tokens)."""
    base, april = (m.loc[(algo, model, dataset, method)] for method in ("baseline", "april"))
    return (100 * (april["throughput"] / base["throughput"] - 1),
            100 * (april["generated"] / base["generated"] - 1))


def claims(df: pd.DataFrame) -> list[Claim]:
    m = steady(df)
    out: list[Claim] = []
    logged, generated = [], []
    for (algo, model), cells in TABLE1.items():
        for dataset, (base, april) in zip(DATASETS, cells, strict=True):
            cfg = f"{algo} {model} {dataset}"
            sim_base = m.loc[(algo, model, dataset, "baseline"), "throughput"]
            kind = "input" if algo == "grpo" else "input (not fitted)"
            out.append(Claim(PAPER, "baseline rollout throughput (tok/s)", "batch_tokens_per_s",
                             cfg, base, base, sim_base, 0.10, kind))
            gain, gain_b = gains(m, algo, model, dataset)
            logged.append(gain)
            generated.append(gain_b)
            paper_gain = round(100 * (april / base - 1), 1)
            out.append(Claim(PAPER, "APRIL throughput gain %", "batch_tokens_per_s", cfg,
                             paper_gain, paper_gain, gain, 0.25))
            out.append(Claim(PAPER, "APRIL throughput gain %" + GENERATED,
                             "rollout_tokens_per_s", cfg, paper_gain, paper_gain, gain_b, 0.25))
    out.append(Claim(PAPER, "mean throughput gain %", "batch_tokens_per_s", "12 cells",
                     MEAN_GAIN_PCT, MEAN_GAIN_PCT, sum(logged) / len(logged), 0.25))
    out.append(Claim(PAPER, "mean throughput gain %" + GENERATED, "rollout_tokens_per_s",
                     "12 cells", MEAN_GAIN_PCT, MEAN_GAIN_PCT,
                     sum(generated) / len(generated), 0.25))
    grpo = m.xs("april", level="method").xs("grpo", level="algo")
    out.append(Claim(PAPER, "carried-over token share % (GRPO)", "offpolicy_token_frac",
                     "steady rounds", CARRIED_SHARE_PCT, CARRIED_SHARE_PCT,
                     100 * grpo["carried"].mean(), 0.15))
    out.append(Claim(PAPER, "most policy versions behind one completed sample",
                     "versions_per_sample_max", "all APRIL runs", 1, MAX_VERSIONS,
                     m.xs("april", level="method")["versions"].max(), 0.0))
    return out


def gains_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per Table 1 cell: throughput and gain under both definitions, beside the paper's.

    `logged` is slime's figure (tokens of the samples a rollout returns, resumed
    prefixes included); `generated` is the paper's text (tokens generated in the
    round, aborted and discarded work included, resumed prefixes not again);
    `carried_pct` is the share of APRIL's trained tokens generated in earlier rounds."""
    m = steady(df)
    rows = []
    for (algo, model), cells in TABLE1.items():
        for dataset, (base, april) in zip(DATASETS, cells, strict=True):
            b, a = (m.loc[(algo, model, dataset, k)] for k in ("baseline", "april"))
            gain, gain_b = gains(m, algo, model, dataset)
            rows.append({"algo": algo, "model": model, "dataset": dataset,
                         "paper_gain_pct": round(100 * (april / base - 1), 1),
                         "logged_baseline_tok_s": b["throughput"],
                         "logged_april_tok_s": a["throughput"], "logged_gain_pct": gain,
                         "generated_baseline_tok_s": b["generated"],
                         "generated_april_tok_s": a["generated"], "generated_gain_pct": gain_b,
                         "carried_pct": 100 * a["carried"]})
    return pd.DataFrame(rows)


DATASET_LABELS = {"dapo-math-17k": "DAPO-Math-17k", "deepscaler": "DeepScaleR",
                  "deepmath-103k": "DeepMath-103k"}
ALGO_LABELS = {"grpo": "GRPO", "dapo": "DAPO (dynamic sampling)"}
MODEL_LABELS = {"qwen3-4b": "Qwen3-4B", "qwen3-8b": "Qwen3-8B"}


def figure(df: pd.DataFrame, path: Path) -> None:
    """Table 1 as bars: simulated throughput, baseline and APRIL, per algorithm, model
    and dataset, with the paper's values as black ticks. The datasets are named in
    full so that DAPO the algorithm is not read as DAPO-Math-17k the dataset; the
    legend sits above the panels, clear of the bars."""
    import matplotlib.pyplot as plt
    import numpy as np

    m = steady(df)["throughput"]
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.4), sharey=True)
    for ax, (algo, model) in zip(axes, TABLE1, strict=True):
        x = np.arange(len(DATASETS))
        for i, method in enumerate(("baseline", "april")):
            sim = [m.loc[(algo, model, d, method)] for d in DATASETS]
            paper = [TABLE1[(algo, model)][j][i] for j in range(len(DATASETS))]
            color = "#8c8c8c" if method == "baseline" else "#dd8452"
            label = "APRIL, simulated" if method == "april" else "baseline, simulated"
            ax.bar(x + (i - 0.5) * 0.38, sim, 0.38, color=color, label=label)
            ax.scatter(x + (i - 0.5) * 0.38, paper, marker="_", s=300, color="k",
                       label="paper (Table 1)" if i == 0 else None, zorder=3)
        ax.set_xticks(x, [DATASET_LABELS[d] for d in DATASETS], fontsize=8)
        ax.set_xlabel("dataset")
        ax.set_title(f"{ALGO_LABELS[algo]}, {MODEL_LABELS[model]}", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("rollout throughput (tokens/s, 8 GPUs)")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=8,
               bbox_to_anchor=(0.5, 1.0), frameon=False)
    fig.suptitle("Simulated APRIL Table 1: rollout throughput as slime logs it, baseline vs "
                 "APRIL, per algorithm and model (paper: black ticks)", fontsize=10, y=1.12)
    save_figure(fig, path)


def reproduce(out: Path, figures: Path, rounds: int = 4, seed: int = 0) -> list[Claim]:
    """Run the 24 configurations; `rounds` is fixed by the setup (8, two warm-up)."""
    df = simulate(seed=seed)
    write_atomic(out / "april.csv", df.to_csv(index=False, float_format="%.6g"))
    write_atomic(out / "april_gains.csv", gains_table(df).to_csv(index=False,
                                                                 float_format="%.6g"))
    figure(df, figures / "april_table1.png")
    return claims(df)
