"""The staleness study's tables: one row per run, one per setting, and the answer.

`runs` reads every cell's trace (in `jobs` processes; each run's figures are kept
beside its trace, so a rerun only redraws), `summarise` takes each system, split
and setting over its seeds, and `answer` says which setting trains the most
tokens per second within each bound on the lag.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

from harness.core.config import ConfigError
from harness.studies.staleness import grid
from harness.studies.staleness.traces import FIGURES, TraceProblem, read_events, steady_figures

CACHE = "staleness.json"
CACHE_VERSION = 7  # bump when a figure's definition changes: cached rows are then redone
KEYS = ["system", "split", "knob", "setting"]
LAG_BOUNDS = (0, 1, 2, 4, 8)  # the answer's bounds on the max lag, in steps
# How a setting reads in tables and the figure: plan's short names, and this study's own.
SHORT = {grid.G: "G", "slime_async.sglang_server_concurrency": "C"}


def split_label(config: dict[str, Any]) -> str:
    """'4+4': engine GPUs + trainer GPUs; '8 coloc' for a colocated run."""
    sim = config.get("sim", {})
    gpus = sim.get("rollout_engines", 1) * sim.get("rollout_tp", 1)
    if sim.get("placement") == "colocated":
        return f"{gpus} coloc"
    return f"{gpus}+{sim.get('trainer_gpus')}"


def setting_label(knob: str | None, value: Any) -> str:
    """'G=2', 'ofp=1', 'lag=none' ...; '' for a system without a knob."""
    from harness.studies.plan.knobs import SHORT as PLAN_SHORT

    if knob is None:
        return "default"
    if value is None or (knob == "max_lag" and value == -1):
        return f"{SHORT.get(knob) or PLAN_SHORT.get(knob, knob)}=none"
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    return f"{SHORT.get(knob) or PLAN_SHORT.get(knob, knob)}={shown}"


def run_row(trace: str) -> dict[str, Any]:
    """One run's row: what it ran (from its header) and its figures (`traces`)."""
    from harness.analysis.check.bounds import staleness

    events = read_events(trace)
    head = events[0]
    config = head.get("config") or {}
    knob, value = grid.setting(head["system"], config)
    bound = staleness(head, None).value
    sim = config.get("sim") or {}
    return {"system": head["system"], "split": split_label(config),
            "knob": knob or "",
            "setting": setting_label(knob, value),
            "value": -1 if value is None else value, "seed": head.get("seed"),
            "bound": math.nan if bound is None else bound, "workload": head.get("workload"),
            "model": sim.get("model"), "update_groups": config.get("update_groups"),
            "group_size": config.get("group_size"),
            "engine_kind": "speculative" if sim.get("spec_drafter", "off") != "off" else "plain",
            **steady_figures(events)}


def _cached(cell: Path) -> dict[str, Any] | None:
    from harness.core.files import read_cached

    return read_cached(cell / CACHE, CACHE_VERSION)


def _compute(cell: str) -> dict[str, Any]:
    from harness.core.files import write_cached
    from harness.core.trace_io import find_trace

    trace = find_trace(cell)
    try:
        row = run_row(str(trace))
    except TraceProblem as err:  # one line naming the trace, not a worker's traceback
        msg = str(err) if str(trace) in str(err) else f"{trace}: {err}"
        raise ConfigError(msg) from None
    write_cached(Path(cell) / CACHE, CACHE_VERSION, row)
    return row


def runs(table: dict[str, Any], sweep: Any, out: Path, jobs: int = 1) -> pd.DataFrame:
    """One row per run of the sweep that finished (failed cells have no trace); a trace
    the study cannot read is a ConfigError naming it."""
    from harness.studies.sweep import read_result

    done = [out / "cells" / c.key for c in sweep.cells
            if (r := read_result(out, c)) is not None and not r.get("error")]
    from harness.core.progress import LateBar

    rows = {str(d): _cached(d) for d in done}
    todo = [d for d, row in rows.items() if row is None]
    # a bar once it runs 2 s: 666 cells' traces took 80-95 s, said by nothing (a trial)
    parallel = jobs > 1 and len(todo) > 8
    with (LateBar("reading the cells' traces", len(todo)) as bar,
          ProcessPoolExecutor(max_workers=jobs) if parallel else contextlib.nullcontext() as pool):
        found = pool.map(_compute, todo, chunksize=8) if parallel else map(_compute, todo)
        for n, (d, row) in enumerate(zip(todo, found, strict=True), start=1):
            rows[d] = row
            bar.update(n)
    frame = pd.DataFrame([rows[str(d)] for d in done],
                         columns=["system", "split", "knob", "setting", "value", "seed",
                                  "bound", "workload", "model", "update_groups",
                                  "group_size", "engine_kind", *FIGURES])
    return frame


def _pareto(points: pd.DataFrame, x: str, y: str) -> pd.Series:
    """True where no other point has x <= and y >= with one of them strict."""
    out = []
    for _, p in points.iterrows():
        better = points[(points[x] <= p[x]) & (points[y] >= p[y])
                        & ((points[x] < p[x]) | (points[y] > p[y]))]
        out.append(better.empty)
    return pd.Series(out, index=points.index)


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """Per system, split and setting, over its seeds: throughput's mean, least and
    most; the worst max lag of any seed (what a user must allow for); the means of
    the rest. `pareto`: no other setting of its split (colocated runs count in every
    split) trains more at a max lag no higher."""
    if "engine_kind" not in df.columns:  # a summary from before engines were told apart
        df = df.assign(engine_kind="plain")
    g = df.groupby(KEYS, sort=False)
    out = g.agg(value=("value", "first"), seeds=("seed", "nunique"),
                engine_kind=("engine_kind", "first"),  # not `engine`: agg's own keyword
                bound=("bound", "first"),
                trained_tokens_per_s=("trained_tokens_per_s", "mean"),
                trained_tokens_per_s_min=("trained_tokens_per_s", "min"),
                trained_tokens_per_s_max=("trained_tokens_per_s", "max"),
                generated_tokens_per_s=("generated_tokens_per_s", "mean"),
                warmup_steps=("warmup_steps", "mean"), drain_steps=("drain_steps", "mean"),
                lag_mean=("lag_mean", "mean"),
                lag_max=("lag_max", "max"), lag_max_run=("lag_max_run", "max"),
                ess=("ess", "mean"), ess_min=("ess_min", "min"),
                trainer_idle=("trainer_idle", "mean"), rollout_idle=("rollout_idle", "mean"),
                in_flight=("in_flight", "mean"), backlog=("backlog", "mean"),
                dropped_groups=("dropped_groups", "mean"),
                wasted_share=("wasted_share", "mean"),
                sync_share=("sync_share", "mean")).reset_index()
    out["pareto"] = False
    for split in _splits(out):
        pts = _in_split(out, split)
        out.loc[pts.index, "pareto"] = out.loc[pts.index, "pareto"] | _pareto(
            pts, "lag_max", "trained_tokens_per_s")
    return out


def _splits(summary: pd.DataFrame) -> list[str]:
    """The disaggregated splits, in the order run (a colocated run has none)."""
    return [s for s in dict.fromkeys(summary["split"]) if not s.endswith("coloc")]


def _in_split(summary: pd.DataFrame, split: str) -> pd.DataFrame:
    """A split's rows and every colocated row (the same GPUs, used another way)."""
    return summary[(summary["split"] == split) | summary["split"].str.endswith("coloc")]


def within(summary: pd.DataFrame, split: str, bound: float,
           engine: str = "plain") -> pd.DataFrame:
    """The split's settings (colocated ones too) on `engine` whose every seed kept its
    max lag within `bound`, the most tokens per second first: the answer's candidates.
    A run whose engine speculates (`sim.spec_*`, TLT's by default) is ranked apart: its
    gain is the engine's, an option every system has, not its schedule's."""
    pts = _in_split(summary, split)
    if "engine_kind" in pts.columns:
        pts = pts[pts["engine_kind"] == engine]
    elif engine != "plain":
        return pts.iloc[0:0]
    return pts[pts["lag_max"] <= bound].sort_values("trained_tokens_per_s", ascending=False)


def speculative(summary: pd.DataFrame, bounds: tuple[int, ...] = LAG_BOUNDS) -> pd.DataFrame:
    """Per split and bound: the best setting on a speculative engine beside the answer's
    best on the plain one, and their ratio (what the engine option adds there)."""
    rows = []
    for split in _splits(summary):
        for bound in bounds:
            spec, plain = within(summary, split, bound, "speculative"), within(summary, split,
                                                                                bound)
            if spec.empty or plain.empty:
                continue
            best, ref = spec.iloc[0], plain.iloc[0]
            rows.append({"split": split, "max_lag_at_most": bound, "speculative": _name(best),
                         "trained_tokens_per_s": best["trained_tokens_per_s"] / 1e3,
                         "range": _range(best), "plain_best": _name(ref),
                         "plain_tokens_per_s": ref["trained_tokens_per_s"] / 1e3,
                         "ratio": best["trained_tokens_per_s"] / ref["trained_tokens_per_s"]})
    return pd.DataFrame(rows)


def leading(summary: pd.DataFrame, bounds: Sequence[int] = LAG_BOUNDS
            ) -> Iterator[tuple[str, int, pd.DataFrame]]:
    """(split, bound, candidates best first) for each split and bound with a candidate:
    what the answer and the derived leaders' table both read."""
    for split in _splits(summary):
        for bound in bounds:
            ok = within(summary, split, bound)
            if not ok.empty:
                yield split, bound, ok


def answer(summary: pd.DataFrame, bounds: tuple[int, ...] = LAG_BOUNDS) -> pd.DataFrame:
    """Per split and bound L on the max lag: the setting with the most tokens per
    second among those whose every seed stayed within L, and the best of the other
    systems, each with its seeds' range: where the ranges overlap, the seeds do not
    tell the two apart."""
    rows = []
    for split, bound, ok in leading(summary, bounds):
        best = ok.iloc[0]
        rest = ok[ok["system"] != best["system"]]
        row = {"split": split, "max_lag_at_most": bound, "best": _name(best),
               "trained_tokens_per_s": best["trained_tokens_per_s"],
               "range": _range(best),
               "lag_mean": best["lag_mean"], "trainer_idle": best["trainer_idle"],
               "rollout_idle": best["rollout_idle"]}
        if not rest.empty:
            second = rest.iloc[0]
            row.update(next_best=_name(second),
                       next_tokens_per_s=second["trained_tokens_per_s"],
                       next_range=_range(second),
                       apart=bool(best["trained_tokens_per_s_min"]
                                  > second["trained_tokens_per_s_max"]))
        rows.append(row)
    return pd.DataFrame(rows)


def _range(row: pd.Series) -> str:
    """The seeds' least and most tokens per second, in thousands: '7.49-7.91'."""
    low, high = row["trained_tokens_per_s_min"], row["trained_tokens_per_s_max"]
    return f"{low / 1e3:.2f}-{high / 1e3:.2f}"


def _name(row: pd.Series) -> str:
    return row["system"] if row["setting"] == "default" else f"{row['system']} {row['setting']}"


def markdown(summary: pd.DataFrame) -> str:
    """The answer and a condensed summary as the Markdown tables docs/whatif/staleness.md
    quotes (`python -m harness.studies.staleness SUMMARY.csv`); tokens/s in thousands."""
    a = answer(summary)
    for col in ("trained_tokens_per_s", "next_tokens_per_s"):  # no next: one system ran
        if col in a.columns:
            a[col] = (a[col] / 1e3).round(2)
    cols = ["system", "split", "setting", "trained_tokens_per_s", "trained_tokens_per_s_min",
            "trained_tokens_per_s_max", "generated_tokens_per_s", "warmup_steps", "drain_steps",
            "lag_mean", "lag_max", "ess", "trainer_idle", "rollout_idle", "in_flight", "backlog",
            "dropped_groups", "pareto"]
    s = summary[cols].copy()
    for col in ("trained_tokens_per_s", "trained_tokens_per_s_min", "trained_tokens_per_s_max"):
        s[col] = (s[col] / 1e3).round(2)
    spec = speculative(summary)
    apart = ("" if spec.empty else
             "On a speculative engine, ranked apart (thousand tokens a second):\n\n"
             + spec.round(2).to_markdown(index=False) + "\n\n")
    return (a.round(2).to_markdown(index=False) + "\n\n" + apart
            + s.round({"lag_mean": 2, "ess": 3, "trainer_idle": 2, "rollout_idle": 2,
                       "in_flight": 1, "backlog": 0, "dropped_groups": 0})
            .to_markdown(index=False) + "\n")

