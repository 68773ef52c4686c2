"""What every system would have done with exactly a run's work (`rolloutbench
counterfactual`).

The trace's groups (their prompt and response lengths, rewards and, where the
source timed them, check latencies) are replayed under each system on the
simulator for as many rounds as the trace holds, each system resolving its own
defaults (APRIL's over-sampling) against the trace's R, K and rounds. When the
trace is timed, its own metrics are measured ones: they come first, then the
simulated twin of the run, on the run's own schedule (`harness.studies.twin.
schedule`: an imported slime run that over-sampled with partial rollouts is
replayed as APRIL with its knobs) and, unless told otherwise, on the run's own
engine (and trainer, where the trace times one) fitted to its requests
(`harness.studies.twin`), with its error beside each figure: the simulator
checked against the user's run on the figures both have. An imported run whose
source recorded no training (slime's dumps, AReaL's records) has its rollout
figures only; a veRL run imported with its metrics file has its trainer spans.
Every system then runs on that same fitted engine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, is_dataclass
from pathlib import Path
from typing import Any

from harness.core.config import ConfigError, RunConfig
from harness.core.config_io import apply
from harness.core.metrics import round_metrics
from harness.core.trace import read_trace
from harness.core.trace_io import trace_file
from harness.core.yardstick import FIGURES as YARDSTICK
from harness.core.yardstick import KEYS, delivered, describe, steps_text

# The figures of the table and figure, in order: (row key, short header, unit). The
# yardstick's (harness.core.yardstick: what each run delivers over its steady window,
# the same for synchronous and asynchronous systems), the window's lag and ESS, and the
# mean rollout time per round, a paper metric kept because it is what a source that
# times no training (slime's dumps, AReaL's records) lets the twin be checked on.
FIGURES = (
    *YARDSTICK,
    ("lag_mean", "lag (window)", "steps"),
    ("ess", "ESS (window)", ""),
    ("rollout_complete_s", "rollout done (paper)", "s"),
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


def describe_trainer(cfg: RunConfig) -> str:
    """The simulated trainer in a few words."""
    s = cfg.sim
    if s.placement == "colocated":
        return f"colocated on the {s.rollout_engines * s.rollout_tp} x {s.rollout_gpu}"
    return f"{s.trainer_gpus} x {s.trainer_gpu}"


def summary(events: list[dict[str, Any]]) -> dict[str, Any]:
    """A run's figures from its events: the yardstick's over its steady window (NaN, and
    `window` saying why, where it has none), the window's lag and ESS, the mean rollout
    time per round; `window` says which steps the window holds."""
    fig = delivered(events)
    done = [r["rollout_complete_s"] for r in round_metrics(events)]
    done = [v for v in done if v == v]
    return {**{k: fig[k] for k in KEYS},
            "lag_mean": fig["window_lag_mean"], "ess": fig["window_ess"],
            "rollout_complete_s": sum(done) / len(done) if done else math.nan,
            "window": describe(fig), "steps": steps_text(fig)}


@dataclass(frozen=True)
class Shape:
    """The work of a trace as a counterfactual replays it: R, K and its rounds (as many
    as its complete groups fill), and its header."""

    groups: int
    group_size: int
    rounds: int
    header: dict[str, Any]
    update_groups: int  # the run's own U where its trace records one, else R

    @property
    def timed(self) -> bool:
        meta = self.header.get("import")
        return not (isinstance(meta, dict) and not meta.get("timed"))


def shape(trace: Path) -> Shape:
    from workloads.trace_source import read_groups

    groups, head = read_groups(trace)
    meta = head.get("config") if isinstance(head.get("config"), dict) else {}
    r = min(int(meta.get("groups") or len(groups)), len(groups))
    rounds = min(int(meta.get("rounds") or 1), len(groups) // r)
    u = meta.get("update_groups")
    u = u if isinstance(u, int) and u >= 1 and r % u == 0 else r
    return Shape(r, len(groups[0].lengths), rounds, head, u)


def start(system: str, trace: Path, work: Shape, update_groups: int | None,
          knobs: dict[str, Any] | None = None) -> RunConfig:
    """The unchecked config of one system on the trace's work, before the cluster (the
    file's and --set's) is applied and the system resolves its own defaults from the
    trace's R, K and rounds: U as given, else the run's own (one update per round where
    the trace does not record it)."""
    u = update_groups if update_groups is not None else work.update_groups
    if work.groups % u:
        raise ConfigError(f"--update-groups: U={u} must divide the trace's groups per "
                          f"round R={work.groups}")
    cfg = RunConfig(system=system, workload=f"trace-cycle:{trace}", runtime="sim",
                    groups=work.groups, group_size=work.group_size, update_groups=u,
                    rounds=work.rounds, max_response_tokens=0)
    for name, value in (knobs or {}).items():
        if not hasattr(cfg, name) or name in FROM_TRACE:
            continue
        if is_dataclass(getattr(cfg, name)):  # a table (an async system's knobs): by field
            apply(cfg, {name: value})
        else:
            setattr(cfg, name, value)
    return cfg


def measured(events: list[dict[str, Any]]) -> dict[str, float] | None:
    """A trace's own figures when it holds times (an imported timed run, or any run's
    trace), else None."""
    meta = events[0].get("import")
    if isinstance(meta, dict) and not meta.get("timed"):
        return None
    return summary(events)


def twin_error(measured_row: dict[str, float], twin: dict[str, float]) -> dict[str, float]:
    """(twin - measured) / measured for each figure both have."""
    out = {}
    for key, _, _ in FIGURES:
        m, s = measured_row.get(key, math.nan), twin.get(key, math.nan)
        if isinstance(m, str) or isinstance(s, str):
            continue
        if not (math.isnan(m) or math.isnan(s)) and m != 0:
            out[key] = (s - m) / abs(m)
    return out


def _same(a: RunConfig, b: RunConfig) -> bool:
    return a.to_dict() == b.to_dict()


def run(trace: Path, cfgs: list[RunConfig], out: Path, twin: RunConfig | None = None,
        progress: bool = True) -> list[dict[str, Any]]:
    """The table's rows: measured first (when timed), then the simulated twin of the
    run (the run's own schedule; `twin`, run on its own unless a system's config is the
    same), then each system's simulated run; the twin carries its error against the
    measured figures."""
    from harness.studies.reproduce.grid import run_configs

    events = read_trace(trace, allow_cut=True)  # a cut trace: the command said so once
    head = events[0]
    original = str(head.get("system"))
    fmt = head.get("import", {}).get("format") if isinstance(head.get("import"), dict) else None
    seen = measured(events)
    twin_at = next((i for i, c in enumerate(cfgs) if twin is not None and _same(c, twin)),
                   None)
    extra = [] if twin is None or twin_at is not None else [twin]
    folder = out / "runs"
    folder.mkdir(parents=True, exist_ok=True)
    jobs = [(c, trace_file(folder, c.system)) for c in cfgs]  # simulated: compressed
    jobs += [(c, trace_file(folder, "twin")) for c in extra]
    results = run_configs(jobs, label="counterfactual", progress=progress)
    rows: list[dict[str, Any]] = []
    if seen is not None:
        rows.append({"system": f"{original} (measured)", "source": fmt or "trace",
                     "rounds": cfgs[0].rounds, **seen})

    def row(cfg: RunConfig, path: Path, is_twin: bool, name: str) -> dict[str, Any]:
        out_row = {"system": name, "source": "simulated twin" if is_twin else "simulated",
                   "rounds": cfg.rounds, **summary(read_trace(path))}
        if is_twin and seen is not None:
            out_row.update({f"{k}_error": v for k, v in twin_error(seen, out_row).items()})
        return out_row

    if len(results) != len(jobs):
        raise RuntimeError(f"counterfactual: {len(jobs) - len(results)} runs did not finish")
    if extra:
        rows.append(row(extra[0], trace_file(folder, "twin"), True,
                        f"{original} as run ({extra[0].system})"))
    for i, cfg in enumerate(cfgs):
        rows.append(row(cfg, trace_file(folder, cfg.system), i == twin_at, cfg.system))
    return rows


def figure(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    """One panel per figure: a bar per system, the measured value as a dashed line."""
    import matplotlib.pyplot as plt

    from harness.core.plots import save_figure

    sims = [r for r in rows if r["source"] != "trace" and "(measured)" not in r["system"]]
    seen = next((r for r in rows if "(measured)" in r["system"]), None)
    panels = [f for f in FIGURES if any(not math.isnan(r[f[0]]) for r in sims)]
    if not panels:
        return
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
