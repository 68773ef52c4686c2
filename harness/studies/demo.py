"""`make live-demo`: a few live rounds of every system on the tiny warmed-up model.

Builds (or reuses) the local model, warms it up on the arith format, then runs
slime, cgp, cgp-fgd, pipelinerl, april and rollpacker live with the same small
configuration, writing each trace, one metrics table and a figure.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.config import RunConfig
from harness.core.files import write_atomic
from harness.core.plots import save_figure
from harness.run.execute import execute

SYSTEMS = ("slime", "cgp", "cgp-fgd", "pipelinerl", "april", "rollpacker")


def config(system: str, model_dir: Path, seed: int, rounds: int) -> RunConfig:
    cfg = RunConfig(system=system, workload="arith", runtime="live", seed=seed, rounds=rounds,
                    groups=8, group_size=4, update_groups=2, frontier=2, concurrency=16,
                    over_sampling_groups=12, max_response_tokens=48)
    if system in ("april", "rollpacker"):
        cfg.update_groups = cfg.groups  # one update per rollout, as those papers do
    cfg.live.model_dir = str(model_dir)
    cfg.live.lr = 3e-4
    return cfg.validate()


def run(out: Path, seed: int = 0, rounds: int = 2, progress: bool = True) -> pd.DataFrame:
    from harness.core.progress import Bar, stage
    from harness.live.logs import quiet_bars
    from harness.live.model import arith_examples, init_model, warmup

    quiet_bars()
    with stage("live-demo: building the model"):
        model_dir = Path(init_model(out / "model", seed=seed))
    with Bar("live-demo: warming the model up", 200, enabled=progress) as bar:
        warmup(model_dir, arith_examples(4000, seed), seed=seed,
               on_step=lambda _step: bar.advance())
    from harness.live.ray_actors import session

    rows = []
    with session(RunConfig().live.ray_address):
        for system in SYSTEMS:  # each run says its own stages
            rows += execute(config(system, model_dir, seed, rounds), out / f"{system}.jsonl")
    df = pd.DataFrame(rows)
    write_atomic(out / "metrics.csv", df.to_csv(index=False, float_format="%.6g"))
    figure(df, out / "live_demo.png")
    return df


def figure(df: pd.DataFrame, path: Path) -> None:
    import matplotlib.pyplot as plt

    means = df.groupby("system", sort=False).mean(numeric_only=True)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
    for ax, key, label in zip(axes, ("rollout_to_train_end_s", "waiting_ratio", "ess"),
                              ("rollout-to-train-end (s)", "trainer waiting ratio",
                               "ESS (measured)"), strict=True):
        ax.bar(means.index, means[key], color="#4c72b0")
        ax.set_title(label, fontsize=9)
        ax.tick_params(axis="x", rotation=30, labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Live on CPU: tiny Qwen3 model, vLLM engine, torch trainer (mean of rounds)",
                 fontsize=10, y=1.03)
    save_figure(fig, path)
