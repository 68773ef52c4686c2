"""`make live-demo`: a few live rounds of every system on a real engine and trainer.

The tiny local model answers arithmetic in a few tokens, and with responses that
short every schedule looks alike: the systems differ by how they overlap long,
uneven generations with training. So the demo does what validation does: every
response is replayed to the length LSAT-AR's long-tailed distribution assigns it,
scaled into the tiny model's context (`lsat-ar-live`, live.lengths = "replay"),
on a real vLLM engine and torch trainer. Builds (or reuses) the model, starts one engine and
one learner, and runs slime, cgp, cgp-fgd, pipelinerl, april and rollpacker on
them with one configuration, writing each trace, one metrics table and a figure.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.config import RunConfig
from harness.core.files import write_atomic
from harness.core.plots import save_figure

SYSTEMS = ("slime", "cgp", "cgp-fgd", "pipelinerl", "april", "rollpacker")


WORKLOAD, GROUPS = "lsat-ar-live", 32  # validation's lsat R=32 shape: about four minutes


def config(system: str, model_dir: Path, seed: int, rounds: int) -> RunConfig:
    """Validation's settings (sweeps/validation.toml): replayed lengths, K=4, U=2,
    FGD at F_w = 4U, PipelineRL at H=32, APRIL over-sampling 2R."""
    cfg = RunConfig(system=system, workload=WORKLOAD, runtime="live", seed=seed, rounds=rounds,
                    groups=GROUPS, group_size=4, update_groups=2, frontier=8, concurrency=32,
                    over_sampling_groups=2 * GROUPS)
    if system in ("april", "rollpacker"):
        cfg.update_groups = cfg.groups  # one update per rollout, as those papers do
    live = cfg.live
    live.model_dir, live.lr, live.lengths = str(model_dir), 3e-4, "replay"
    live.max_model_len, live.kv_cache_mb, live.ray_address = 2048, 256, "off"
    live.trainer_cores = 1  # the engine core alone on one core, as validation runs it
    return cfg.validate()


def run(out: Path, seed: int = 0, rounds: int = 2) -> pd.DataFrame:
    """Every system live, one after the other, on one engine and one learner started
    once and lent to each run (`harness.live.session`, as validation does): starting
    vLLM for each would take longer than the runs."""
    import asyncio

    from harness.core.metrics import round_metrics
    from harness.core.progress import stage
    from harness.core.trace import read_trace
    from harness.live.env import use_in_process
    from harness.live.logs import engine_log, quiet_bars
    from harness.live.model import init_model
    from harness.shared.defaults import resolve_defaults

    quiet_bars()
    with stage("live-demo: building the model"):  # replayed lengths need no warm-up
        model_dir = Path(init_model(out / "model", seed=seed))
    configs = [resolve_defaults(config(system, model_dir, seed, rounds)) for system in SYSTEMS]
    use_in_process()
    with engine_log(out / "engine.log"):
        asyncio.run(_live(configs, out))
    rows = [row for system in SYSTEMS for row in round_metrics(read_trace(out / f"{system}.jsonl"))]
    df = pd.DataFrame(rows)
    write_atomic(out / "metrics.csv", df.to_csv(index=False, float_format="%.6g"))
    figure(df, out / "live_demo.png")
    return df


async def _live(configs: list[RunConfig], out: Path) -> None:
    from harness.core.progress import say, stage
    from harness.live.runtime import LiveRuntime
    from harness.live.session import open_session
    from harness.live.watch import TraceFollower
    from systems import get_system

    with stage("live-demo: starting the engine and the learner"):
        session = await open_session(configs[0])
    try:
        for cfg in configs:
            trace = out / f"{cfg.system}.jsonl"
            with stage(f"live {cfg.system}: starting") as update:
                follower = TraceFollower(trace, f"live {cfg.system}", cfg.rounds, update, say)
                follower.start()
                try:
                    await LiveRuntime(cfg, trace, session=session).run_async(
                        get_system(cfg.system))
                except BaseException:
                    follower.mute()  # Ctrl-C: no more rounds said while it stops
                    raise
                finally:
                    follower.stop()
    finally:
        await session.close()


def figure(df: pd.DataFrame, path: Path) -> None:
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator, StrMethodFormatter

    means = df.groupby("system", sort=False).mean(numeric_only=True)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.2), layout="constrained")
    for ax, key, label, digits in zip(
            axes, ("rollout_to_train_end_s", "waiting_ratio", "ess"),
            ("rollout-to-train-end (s)", "trainer waiting ratio", "ESS (measured; axis zoomed)"),
            (1, 2, 4), strict=True):
        bars = ax.bar(means.index, means[key], color="#4c72b0")
        ax.bar_label(bars, [f"{v:.{digits}f}" for v in means[key]], fontsize=7, padding=2)
        ax.set_title(label, fontsize=9)
        ax.tick_params(axis="x", rotation=30, labelsize=8)
        ax.grid(axis="y", alpha=0.3)
        if key == "ess":
            ax.set_ylim(*ess_window(means[key].tolist()))
            ax.yaxis.set_major_locator(MaxNLocator(4))
            ax.yaxis.set_major_formatter(StrMethodFormatter("{x:.4f}"))
    fig.suptitle(f"Live on CPU: vLLM engine and torch trainer, {WORKLOAD} lengths replayed, "
                 f"R={GROUPS} (mean of rounds)", fontsize=10)
    save_figure(fig, path)


def ess_window(values: list[float]) -> tuple[float, float]:
    """ESS sits just under 1 for every system (0.987 against 0.99997): on a 0-1 axis
    the bars are alike. The axis spans the values' distance below 1, padded, so the
    differences show; the bar labels carry the numbers."""
    known = [v for v in values if v == v]
    low = min(known, default=0.0)
    gap = max(1.0 - low, 1e-4)
    return max(0.0, low - 0.5 * gap), 1.0 + 0.15 * gap
