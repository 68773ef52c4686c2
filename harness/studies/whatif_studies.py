"""The what-if studies: how each summarises its sweep and draws its figure (the sixth,
staleness, lives in harness/studies/staleness/).

`harness.studies.whatif` runs a study's sweep and calls these; `docs/whatif/NAME.md`
says what each figure shows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.core.plots import save_figure
from harness.studies import staleness

R2TE = "rollout_to_train_end_s"  # the papers' per-round metric
TRAINED = "trained_tokens_per_s"  # the yardstick (harness.core.yardstick): what ranks
PALETTE = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
           "#8c8c8c"]
LABELS = {"slime": "Slime", "cgp": "CGP", "cgp-fgd": "CGP+FGD", "april": "APRIL",
          "cgp-april": "CGP+APRIL", "rollpacker": "RollPacker", "cgp-tail": "CGP+tail"}


@dataclass(frozen=True)
class Study:
    name: str
    question: str
    summarise: Callable[[pd.DataFrame], pd.DataFrame]
    draw: Callable[[pd.DataFrame, Path], None]
    # A study whose spec is not a plain sweep spec turns it into one (`expand`); one
    # that reads its cells' traces, not the sweep's per-round table, builds its own
    # table from them (`runs`: the study's spec, the sweep, its folder, processes).
    expand: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    runs: Callable[[dict[str, Any], Any, Path, int], pd.DataFrame] | None = None
    # A study that explains its answer in words writes them beside its summary
    # (summary.md), so that a rerun rewrites the explanation with the numbers.
    report: Callable[[pd.DataFrame], str] | None = None


# -- helpers ------------------------------------------------------------------


def _steady(df: pd.DataFrame, warmup: int = 0, drain: int = 0) -> pd.DataFrame:
    """Rows of the rounds in [warmup, last - drain]."""
    last = int(df["round"].max())
    return df[(df["round"] >= warmup) & (df["round"] <= last - drain)]


def _schedule(row: pd.Series) -> str:
    """A readable name of one row's system and its knob."""
    system = row["system"]
    label = LABELS.get(system, system)
    if system == "cgp-fgd" and "frontier" in row:
        return f"{label} F_w={int(row['frontier'])}"
    if system in ("april", "cgp-april") and "over_sampling_groups" in row:
        return f"{label} {int(row['over_sampling_groups']) / int(row['groups']):g}xR"
    return label


def _bar_groups(summary: pd.DataFrame, workloads: list[str]
                ) -> Iterator[tuple[int, str, pd.DataFrame, np.ndarray, float]]:
    """Grouped bars: one group per workload, one bar per schedule. Yields each
    schedule's index, name, rows (in workload order), bar positions and width."""
    schedules = list(dict.fromkeys(summary["schedule"]))
    x = np.arange(len(workloads))
    width = 0.8 / len(schedules)
    for i, sched in enumerate(schedules):
        rows = summary[summary["schedule"] == sched].set_index("workload").loc[workloads]
        yield i, sched, rows, x + (i - (len(schedules) - 1) / 2) * width, width


def _plt():  # type: ignore[no-untyped-def]
    import matplotlib.pyplot as plt

    return plt


# -- 1. FGD frontier against model size and KV capacity -------------------------


def _kv_tokens(model: str, mem_fraction: float) -> int:
    from harness.core.config import RunConfig
    from harness.sim.runtime import kv_capacity_tokens

    cfg = RunConfig()
    cfg.sim.model, cfg.sim.mem_fraction = model, float(mem_fraction)
    return kv_capacity_tokens(cfg)


def _frontier_points(df: pd.DataFrame) -> pd.DataFrame:
    """CGP+FGD per (model, memory, F_w), with CGP's figures at the same point."""
    keys = ["sim.model", "sim.mem_fraction"]
    cgp = df[df["system"] == "cgp"].groupby(keys).mean(numeric_only=True)
    fgd = df[df["system"] == "cgp-fgd"].groupby([*keys, "frontier"], as_index=False).mean(
        numeric_only=True)
    base = cgp.loc[list(zip(fgd["sim.model"], fgd["sim.mem_fraction"], strict=True))]
    fgd["cgp_r2te_s"] = base[R2TE].to_numpy()
    fgd["cgp_rollout_s"] = base["rollout_complete_s"].to_numpy()
    fgd["cgp_waiting_ratio"] = base["waiting_ratio"].to_numpy()
    fgd["r2te_vs_cgp"] = fgd[R2TE] / fgd["cgp_r2te_s"]
    fgd["rollout_vs_cgp"] = fgd["rollout_complete_s"] / fgd["cgp_rollout_s"]
    fgd["kv_tokens"] = [_kv_tokens(m, f) for m, f in zip(fgd["sim.model"],
                                                         fgd["sim.mem_fraction"], strict=True)]
    return fgd


def _frontier_summary(df: pd.DataFrame) -> pd.DataFrame:
    pts = _frontier_points(df)
    cols = ["sim.model", "sim.mem_fraction", "kv_tokens", "frontier", "cgp_rollout_s",
            "rollout_complete_s", "rollout_vs_cgp", "cgp_r2te_s", R2TE, "r2te_vs_cgp",
            "cgp_waiting_ratio", "waiting_ratio", "trainer_compute_s"]
    return pts[cols].sort_values(["sim.model", "kv_tokens", "frontier"])


def _frontier_figure(df: pd.DataFrame, path: Path) -> None:
    plt = _plt()
    pts = _frontier_points(df)
    models = list(dict.fromkeys(df["sim.model"]))
    widths = sorted(pts["frontier"].unique())
    fig, axes = plt.subplots(3, len(models), figsize=(4.2 * len(models), 8.4), squeeze=False,
                             sharey="row", sharex=True)
    rows = [("rollout_vs_cgp", 1, "rollout time, CGP+FGD / CGP"),
            ("r2te_vs_cgp", 1, "rollout-to-train-end, CGP+FGD / CGP"),
            ("waiting_ratio", 100, "trainer waiting ratio (%)")]
    for col, model in enumerate(models):
        sub = pts[pts["sim.model"] == model]
        for i, fw in enumerate(widths):
            line = sub[sub["frontier"] == fw].sort_values("kv_tokens")
            for r, (key, scale, _) in enumerate(rows):
                axes[r, col].plot(line["kv_tokens"] / 1e3, scale * line[key], marker="o", ms=3,
                                  color=PALETTE[i % len(PALETTE)],
                                  label=f"F_w={fw}" + (" (= U)" if fw == 2 else ""))
        cgp = sub[sub["frontier"] == widths[0]].sort_values("kv_tokens")
        axes[2, col].plot(cgp["kv_tokens"] / 1e3, 100 * cgp["cgp_waiting_ratio"], "k--",
                          label="CGP")
        for r in (0, 1):
            axes[r, col].axhline(1.0, color="k", ls="--", lw=1)
        axes[0, col].set_title(f"{model}, trainer compute {sub['trainer_compute_s'].mean():.0f} s")
        axes[2, col].set_xlabel("engine KV cache (thousand tokens)")
        for r in range(3):
            axes[r, col].set_xscale("log", base=2)
            axes[r, col].set_xticks([20, 40, 80, 160, 320], ["20", "40", "80", "160", "320"])
            axes[r, col].grid(alpha=0.3)
    for r, (_, _, label) in enumerate(rows):
        axes[r, 0].set_ylabel(label, fontsize=9)
    axes[0, 0].legend(fontsize=7)
    axes[2, 0].legend(fontsize=7)
    fig.suptitle("What-if: FGD frontier width vs model size and KV cache (lsat-ar, R=64, "
                 "U=2, 2x A100-40GB TP=2, 8x RTX 4090; mean of 2 rounds)", fontsize=9, y=1.0)
    fig.tight_layout()
    save_figure(fig, path)


# -- 2. heavier-tailed response lengths ------------------------------------------


def _tail_stats(workload: str) -> dict[str, float]:
    from workloads.profile import load_profile
    from workloads.profile_stats import stats

    s = stats(load_profile(workload), prompts=2000, batch=64)
    return {"p99_tokens": s["p99"], "max_over_median": s["max_median"],
            "share_at_cap": s["share_at_cap"]}


def _tails_summary(df: pd.DataFrame) -> pd.DataFrame:
    df = df.assign(schedule=df.apply(_schedule, axis=1))
    keys = ["workload", "schedule"]
    out = df.groupby(keys, sort=False).agg(
        r2te_s=(R2TE, "mean"), r2te_sd=(R2TE, "std"), rollout_s=("rollout_complete_s", "mean"),
        first_dispatch_s=("first_dispatch_s", "mean"), waiting_ratio=("waiting_ratio", "mean"),
        trainer_compute_s=("trainer_compute_s", "mean"),
        mean_response_tokens=("mean_response_tokens", "mean")).reset_index()
    slime = out[out["schedule"] == "Slime"].set_index("workload")["r2te_s"]
    out["r2te_vs_slime_pct"] = 100 * (out["r2te_s"] / out["workload"].map(slime) - 1)
    tails = {w: _tail_stats(w) for w in out["workload"].unique()}
    for key in ("max_over_median", "p99_tokens"):
        out[key] = out["workload"].map(lambda w, k=key: tails[w][k])
    return out


def _tails_figure(df: pd.DataFrame, path: Path) -> None:
    plt = _plt()
    summary = _tails_summary(df)
    workloads = list(dict.fromkeys(summary["workload"]))
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for i, sched, rows, pos, width in _bar_groups(summary, workloads):
        axes[0].bar(pos, rows["r2te_s"], width, yerr=rows["r2te_sd"], capsize=2,
                    color=PALETTE[i], label=sched)
        axes[1].bar(pos, 100 * rows["waiting_ratio"], width, color=PALETTE[i], label=sched)
        if sched != "Slime":
            for p, row in zip(pos, rows.itertuples(), strict=True):
                axes[0].text(p, row.r2te_s + row.r2te_sd + 15, f"{row.r2te_vs_slime_pct:+.0f}%",
                             ha="center", fontsize=6, rotation=90)
    tail = summary.groupby("workload")["max_over_median"].first()
    ticks = [f"{w}\nlongest/median {tail[w]:.1f}x" for w in workloads]
    for ax in axes:
        ax.set_xticks(np.arange(len(workloads)), ticks, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("rollout-to-train-end (s)")
    axes[1].set_ylabel("trainer waiting ratio (%)")
    axes[0].legend(fontsize=7, loc="upper left")
    fig.suptitle("What-if: heavier-tailed response lengths at the same mean "
                 "(R=64, U=2, Qwen3-1.7B; mean of 3 rounds x 3 seeds, ±1 sd; % vs Slime)",
                 fontsize=9, y=1.02)
    save_figure(fig, path)


# -- 3. APRIL's over-sampling ratio ---------------------------------------------

APRIL_WARMUP = 2
# Throughput as APRIL's repository computes it: every token generated in the round,
# aborted requests included, over the rollout's time (RLsys-Foundation/APRIL@a72b585
# slime/backends/megatron_utils/data.py:267-273): the harness's `rollout_tokens_per_s`.
APRIL_METRICS = ("rollout_tokens_per_s", R2TE, "offpolicy_token_frac", "lag_mean", "lag_max",
                 "ess", "versions_per_sample_max", "mean_response_tokens")


def _april_summary(df: pd.DataFrame) -> pd.DataFrame:
    df = _steady(df, APRIL_WARMUP).assign(
        ratio=lambda d: d["over_sampling_groups"] / d["groups"],
        mode=lambda d: np.where(d["partial_rollout"], "APRIL (carry over)", "discard"))
    out = df.groupby(["mode", "ratio"], as_index=False)[list(APRIL_METRICS)].mean()
    base = out[out["ratio"] == 1.0].set_index("mode")["rollout_tokens_per_s"]
    out["throughput_gain_pct"] = 100 * (out["rollout_tokens_per_s"] / out["mode"].map(base) - 1)
    return out


def _april_figure(df: pd.DataFrame, path: Path) -> None:
    plt = _plt()
    s = _april_summary(df)
    panels = [("rollout_tokens_per_s", "rollout throughput (tok/s generated)", 1),
              (R2TE, "rollout-to-train-end (s)", 1),
              ("mean_response_tokens", "mean trained response (tokens)", 1),
              ("offpolicy_token_frac", "trained tokens from older policies (%)", 100),
              ("lag_mean", "policy lag, mean (solid) / max (dashed), steps", 1),
              ("ess", "effective sample size (modelled)", 1)]
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.4))
    for ax, (col, label, scale) in zip(axes.ravel(), panels, strict=True):
        for i, (mode, sub) in enumerate(s.groupby("mode", sort=False)):
            ax.plot(sub["ratio"], scale * sub[col], "o-", color=PALETTE[i], label=mode)
            if col == "lag_mean":
                ax.plot(sub["ratio"], sub["lag_max"], "--", color=PALETTE[i])
        ax.set_ylabel(label, fontsize=8)
        ax.set_xlabel("over-sampling ratio (groups in flight / R)")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    fig.suptitle("What-if: APRIL's over-sampling ratio (Qwen3-4B, 8x MI300X colocated, "
                 "DAPO-Math-17k, R=32; rounds 2-7 of 8, 3 seeds)", fontsize=9, y=1.0)
    fig.tight_layout()
    save_figure(fig, path)


# -- 4. PipelineRL's generation concurrency ---------------------------------------


def _pipelinerl_summary(df: pd.DataFrame) -> pd.DataFrame:
    df = _steady(df, warmup=1, drain=1)  # the first block fills the engines, the last drains
    cols = ["batch_tokens_per_s", "waiting_ratio", "lag_mean", "lag_max", "ess",
            "offpolicy_token_frac", "versions_per_sample_max"]
    out = df.groupby(["max_lag", "concurrency"], as_index=False)[cols].mean()
    out["lag_max"] = df.groupby(["max_lag", "concurrency"])["lag_max"].max().to_numpy()
    return out


def _pipelinerl_figure(df: pd.DataFrame, path: Path) -> None:
    plt = _plt()
    s = _pipelinerl_summary(df)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for i, (lag, sub) in enumerate(s.groupby("max_lag")):
        label = "no admission limit" if lag < 0 else f"max_lag={lag}"
        kw = {"color": PALETTE[i], "marker": "o"}
        axes[0].plot(sub["concurrency"], sub["batch_tokens_per_s"] / 1e3, label=label, **kw)
        axes[1].plot(sub["concurrency"], sub["lag_mean"], label=f"{label}: mean", **kw)
        axes[1].plot(sub["concurrency"], sub["lag_max"], ls="--", color=PALETTE[i],
                     label=f"{label}: max")
        axes[2].plot(sub["concurrency"], sub["ess"], label=label, **kw)
    axes[0].set_ylabel("trained tokens per second (thousands)")
    axes[1].set_ylabel("policy lag (optimizer steps)")
    axes[2].set_ylabel("effective sample size (modelled)")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("generation concurrency H (sequences per engine)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    axes[1].legend(fontsize=7)
    fig.suptitle("What-if: PipelineRL's concurrency H (Qwen2.5-7B, 4+4 H100, ORZ math <= 8k, "
                 "B=64; steady blocks 1-6 of 8)", fontsize=9, y=1.02)
    fig.tight_layout()
    save_figure(fig, path)


# -- 5. combinations the papers did not try --------------------------------------

COMBO_WARMUP = 2


def _combos_summary(df: pd.DataFrame) -> pd.DataFrame:
    df = _steady(df, COMBO_WARMUP)
    df = df.assign(schedule=df.apply(_schedule, axis=1))
    out = df.groupby(["workload", "schedule"], sort=False).agg(
        r2te_s=(R2TE, "mean"), r2te_sd=(R2TE, "std"), rollout_s=("rollout_complete_s", "mean"),
        waiting_ratio=("waiting_ratio", "mean"),
        offpolicy_token_frac=("offpolicy_token_frac", "mean"), lag_mean=("lag_mean", "mean"),
        ess=("ess", "mean"), mean_response_tokens=("mean_response_tokens", "mean"),
        trained_tokens_per_s=(TRAINED, "mean"), trained_min=(TRAINED, "min"),
        trained_max=(TRAINED, "max"),
    ).reset_index()
    for ref in ("Slime", "CGP", "RollPacker"):
        base = out[out["schedule"] == ref].set_index("workload")
        out[f"trained_vs_{ref.lower()}_pct"] = 100 * (
            out[TRAINED] / out["workload"].map(base[TRAINED]) - 1)
        out[f"r2te_vs_{ref.lower()}_pct"] = 100 * (out["r2te_s"] / out["workload"].map(
            base["r2te_s"]) - 1)
    return out


COMBO_SPREAD = (0.1, 0.9)  # the whiskers: these quantiles of the steady rounds


def _combos_spread(df: pd.DataFrame, column: str) -> pd.DataFrame:
    """Per workload and schedule, the COMBO_SPREAD quantiles of `column` over every
    steady round of every seed. Quantiles, not ±1 sd: a heavy-tailed workload's rounds
    are skewed (a few long ones), so mean - sd fell below 0 and was cut there."""
    steady = _steady(df, COMBO_WARMUP)
    steady = steady.assign(schedule=steady.apply(_schedule, axis=1))
    q = steady.groupby(["workload", "schedule"], sort=False)[column].quantile(
        list(COMBO_SPREAD)).unstack()
    q.columns = ["low", "high"]
    return q


def _whiskers(mean: pd.Series, spread: pd.DataFrame, scale: float = 1.0) -> np.ndarray:
    """Matplotlib's asymmetric yerr (below, above) from a mean and its quantiles."""
    below = np.clip(mean.to_numpy() - spread["low"].to_numpy(), 0, None)
    above = np.clip(spread["high"].to_numpy() - mean.to_numpy(), 0, None)
    return scale * np.vstack([below, above])


def _combos_figure(df: pd.DataFrame, path: Path) -> None:
    plt = _plt()
    s = _combos_summary(df)
    workloads = list(dict.fromkeys(s["workload"]))
    panels = ((TRAINED, TRAINED, 1e-3, "trained tokens/s, thousands (steady window)"),
              ("waiting_ratio", "waiting_ratio", 100.0, "trainer waiting ratio (%)"),
              ("offpolicy_token_frac", "offpolicy_token_frac", 100.0,
               "trained tokens from older policies (%)"))
    spreads = {col: _combos_spread(df, col) for _, col, _, _ in panels[1:]}
    spreads[TRAINED] = s.set_index(["workload", "schedule"])[["trained_min", "trained_max"]]
    spreads[TRAINED].columns = ["low", "high"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for i, sched, rows, pos, width in _bar_groups(s, workloads):
        for ax, (mean_col, col, scale, _) in zip(axes, panels, strict=True):
            spread = spreads[col].loc[[(w, sched) for w in workloads]]
            ax.bar(pos, scale * rows[mean_col], width, color=PALETTE[i],
                   yerr=_whiskers(rows[mean_col], spread, scale), capsize=2,
                   error_kw={"elinewidth": 0.8}, label=sched)
    for ax, (*_, label) in zip(axes, panels, strict=True):
        ax.set_xticks(np.arange(len(workloads)), workloads)
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=len(labels),
               bbox_to_anchor=(0.5, -0.06))
    low, high = (round(100 * q) for q in COMBO_SPREAD)
    fig.suptitle("What-if: CGP + APRIL partial rollouts, CGP + RollPacker tail batching "
                 "(Qwen3-1.7B, 2x A100 TP=2, 8x RTX 4090, R=32, U=2; 8 rounds, 3 seeds;\n"
                 "trained tokens/s over each run's steady window, whiskers: least to most seed; "
                 f"the rest over rounds 2-7, whiskers: {low}th to {high}th percentile of them)",
                 fontsize=9, y=1.04)
    fig.tight_layout()
    save_figure(fig, path)


STUDIES: dict[str, Study] = {s.name: s for s in (
    Study("fgd-frontier", "When does FGD's frontier F_w = U starve the engine?",
          _frontier_summary, _frontier_figure),
    Study("heavy-tails", "CGP and CGP+FGD against Slime under heavier-tailed lengths",
          _tails_summary, _tails_figure),
    Study("april-oversampling", "APRIL's over-sampling ratio against staleness and throughput",
          _april_summary, _april_figure),
    Study("pipelinerl-concurrency", "PipelineRL's lag and ESS against concurrency H",
          _pipelinerl_summary, _pipelinerl_figure),
    Study("combos", "CGP's hand-off with APRIL's partial rollouts (cgp-april) and with "
          "RollPacker's tail batching (cgp-tail)",
          _combos_summary, _combos_figure),
    Study("staleness", staleness.QUESTION, staleness.summarise, staleness.draw,
          expand=staleness.expand, runs=staleness.runs, report=staleness.report),
)}
