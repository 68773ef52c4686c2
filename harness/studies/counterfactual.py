"""What every system would have done with exactly a run's work (`rolloutbench
counterfactual`).

The trace's groups (their prompt and response lengths, rewards and, where the
source timed them, check latencies) are replayed under each system on the
simulator, on the cluster the user states, for as many rounds as the trace
holds. When the trace is timed, its own metrics are measured ones: they come
first, and the simulated twin of the system that wrote it sits beside them with
its error, the simulator checked against the user's run on the figures both
have (an imported trace has no trainer spans: its rollout figures only).
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

from harness.core.config import ConfigError, RunConfig
from harness.core.metrics import round_metrics
from harness.core.trace import read_trace

# The figures of the table and figure, in order: (row key, short header, unit).
FIGURES = (
    ("rollout_to_train_end_s", "rollout→train end", "s"),
    ("first_dispatch_s", "first dispatch", "s"),
    ("rollout_complete_s", "rollout done", "s"),
    ("waiting_ratio", "trainer waiting", ""),
    ("rollout_tokens_per_s", "tokens/s", "tok/s"),
    ("lag_mean", "lag", "steps"),
    ("ess", "ESS", ""),
)


# What a counterfactual takes from the trace, never from --set or --config.
FROM_TRACE = ("system", "workload", "runtime", "rounds", "groups", "group_size",
              "max_response_tokens")


def describe_cluster(cfg: RunConfig) -> str:
    """The simulated cluster in one line: what every row of the table assumed."""
    s = cfg.sim
    trainer = ("colocated with the engine" if s.placement == "colocated"
               else f"trainer {s.trainer_gpus} x {s.trainer_gpu}")
    return (f"{s.model} on {s.rollout_engines} x TP{s.rollout_tp} {s.rollout_gpu} "
            f"({s.engine_backend}, {s.step_model} step times), {trainer}")


def summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    """The mean over rounds of each figure, as `compare` takes it (NaN where no round
    has it; a streaming system's over its steady rounds)."""
    from harness.analysis.compare import means

    return means(rows, [key for key, _, _ in FIGURES])


def configs(trace: Path, base: RunConfig, systems: list[str],
            update_groups: int | None = None) -> tuple[list[RunConfig], dict[str, Any]]:
    """One config per system replaying the trace's work on `base`'s cluster: R, K
    and the rounds from the trace (as many rounds as its complete groups fill),
    U as given, else one update per round. Returns them and the trace's header."""
    from workloads.trace_source import read_groups

    groups, head = read_groups(trace)
    meta = head.get("config") if isinstance(head.get("config"), dict) else {}
    k = len(groups[0].lengths)
    r = min(int(meta.get("groups") or len(groups)), len(groups))
    rounds = min(int(meta.get("rounds") or 1), len(groups) // r)
    u = update_groups if update_groups is not None else r
    if r % u:
        raise ConfigError(f"--update-groups: U={u} must divide the trace's groups per "
                          f"round R={r}")
    out = []
    for name in systems:
        cfg = copy.deepcopy(base)
        cfg.system, cfg.workload, cfg.runtime = name, f"trace-cycle:{trace}", "sim"
        cfg.groups, cfg.group_size, cfg.update_groups, cfg.rounds = r, k, u, rounds
        cfg.max_response_tokens = 0  # the trace's cap (resolved from the workload)
        out.append(cfg.validate())
    return out, head


def measured(trace: Path) -> dict[str, float] | None:
    """The trace's own figures when it holds times (an imported timed run, or any
    run's trace), else None."""
    events = read_trace(trace)
    meta = events[0].get("import")
    if isinstance(meta, dict) and not meta.get("timed"):
        return None
    return summary(round_metrics(events))


def twin_error(measured_row: dict[str, float], twin: dict[str, float]) -> dict[str, float]:
    """(twin - measured) / measured for each figure both have."""
    out = {}
    for key, _, _ in FIGURES:
        m, s = measured_row.get(key, math.nan), twin.get(key, math.nan)
        if not (math.isnan(m) or math.isnan(s)) and m != 0:
            out[key] = (s - m) / abs(m)
    return out


def run(trace: Path, base: RunConfig, systems: list[str], out: Path,
        update_groups: int | None = None, progress: bool = True) -> list[dict[str, Any]]:
    """The table's rows: measured first (when timed), then each system's simulated
    run; the original system's row carries its error against the measured one."""
    from harness.studies.reproduce.grid import run_configs

    cfgs, head = configs(trace, base, systems, update_groups)
    folder = out / "runs"
    folder.mkdir(parents=True, exist_ok=True)
    results = run_configs([(c, folder / f"{c.system}.jsonl") for c in cfgs],
                          label="counterfactual", progress=progress)
    original = head.get("system")
    fmt = head.get("import", {}).get("format") if isinstance(head.get("import"), dict) else None
    rows: list[dict[str, Any]] = []
    seen = measured(trace)
    if seen is not None:
        rows.append({"system": f"{original} (measured)", "source": fmt or "trace",
                     "rounds": cfgs[0].rounds, **seen})
    for cfg, metric_rows in zip(cfgs, results, strict=True):
        row = {"system": cfg.system, "source": "simulated", "rounds": cfg.rounds,
               **summary(metric_rows)}
        if seen is not None and cfg.system == original:
            row["source"] = "simulated twin"
            row.update({f"{k}_error": v for k, v in twin_error(seen, row).items()})
        rows.append(row)
    return rows


def figure(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    """One panel per figure: a bar per system, the measured value as a dashed line."""
    import matplotlib.pyplot as plt

    from harness.core.plots import save_figure

    sims = [r for r in rows if r["source"] != "trace" and "(measured)" not in r["system"]]
    seen = next((r for r in rows if "(measured)" in r["system"]), None)
    panels = [f for f in FIGURES if any(not math.isnan(r[f[0]]) for r in sims)]
    cols = min(4, len(panels)) or 1
    fig, axes = plt.subplots(math.ceil(len(panels) / cols) or 1, cols,
                             figsize=(3.1 * cols, 2.2 + 0.18 * len(sims)
                                      * math.ceil(len(panels) / cols)), squeeze=False)
    names = [r["system"] for r in sims]
    for ax, (key, header, unit) in zip(axes.flat, panels, strict=False):
        values = [r[key] for r in sims]
        colors = ["#c44e52" if r["source"] == "simulated twin" else "#4c72b0" for r in sims]
        ax.barh(range(len(sims)), [0 if math.isnan(v) else v for v in values], color=colors)
        ax.set_yticks(range(len(sims)), names if ax in axes[:, 0] else [""] * len(sims),
                      fontsize=8)
        ax.invert_yaxis()
        ax.set_title(f"{header}" + (f" ({unit})" if unit else ""), fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
        if seen is not None and not math.isnan(seen.get(key, math.nan)):
            ax.axvline(seen[key], color="black", linestyle="--", linewidth=1)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(title + ("   (dashed: measured; red: the simulated twin)" if seen else ""),
                 fontsize=9)
    fig.tight_layout()
    save_figure(fig, path)
