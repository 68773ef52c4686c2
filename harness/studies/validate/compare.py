"""How far the simulated twins are from the live runs: tables, a summary, a figure.

Per cell and metric (round means): live, simulated, relative error. Per cell:
request latency (submit to finish, finished requests) at P50/P90/P99 on both
sides, and whether every finished sample has the same length on both sides (it
must: both replay the workload's lengths). Over the grid: the median |error|,
each variant's median and worst, and how often two variants of one shape are
ordered alike by rollout-to-train-end live and simulated; and the decode step's
live/simulated ratio by running batch in each rollout's tail (`tail.py`).
"""

from __future__ import annotations

import itertools
import statistics
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.core.files import write_atomic
from harness.core.metrics import round_metrics
from harness.studies.validate import drift, tail
from harness.studies.validate.grid import Cell

METRICS = ("rollout_to_train_end_s", "first_dispatch_s", "rollout_complete_s", "waiting_ratio")
QUANTILES = (50, 90, 99)
NOISY_FIT = 0.10  # a decode fit looser than this says more about the machine than the engine


def _rel(live: float, sim: float) -> float:
    return abs(sim - live) / abs(live) if live else float("nan")


def latencies(events: list[dict[str, Any]]) -> list[float]:
    """Submit-to-finish seconds of every request that finished."""
    submitted: dict[tuple[int, int], float] = {}
    out = []
    for e in events:
        if e["ev"] == "request_submit":
            submitted[(e["group"], e["sample"])] = e["t"]
        elif e["ev"] == "request_finish" and e["status"] == "finished":
            out.append(e["t"] - submitted[(e["group"], e["sample"])])
    return out


def lengths(events: list[dict[str, Any]]) -> dict[tuple[int, int], int]:
    return {(e["group"], e["sample"]): e["response_tokens"] for e in events
            if e["ev"] == "request_finish" and e["status"] == "finished"}


def cell_rows(cell: Cell, live: list[dict], sim: list[dict],
              probed: list[dict] | None = None) -> list[dict[str, Any]]:
    """Round means of each metric live and simulated; with `probed` (the twin whose
    decode step was re-measured beside the cell, `drift.py`) that twin's too."""
    a, b = round_metrics(live), round_metrics(sim)
    c = round_metrics(probed) if probed is not None else None
    rows = []
    for metric in METRICS:
        x = statistics.fmean(r[metric] for r in a)
        y = statistics.fmean(r[metric] for r in b)
        row = {"cell": cell.name, "shape": cell.shape, "variant": cell.variant,
               "system": cell.config.system, "metric": metric, "live": x, "sim": y,
               "rel_error": _rel(x, y)}
        if c is not None:
            z = statistics.fmean(r[metric] for r in c)
            row |= {"sim_probed": z, "rel_error_probed": _rel(x, z)}
        rows.append(row)
    return rows


def request_row(cell: Cell, live: list[dict], sim: list[dict]) -> dict[str, Any]:
    la, lb = latencies(live), latencies(sim)
    na, nb = lengths(live), lengths(sim)
    both = na.keys() & nb.keys()
    tokens = sorted(na.values())
    row: dict[str, Any] = {"cell": cell.name, "variant": cell.variant, "requests": len(la),
                           "median_tokens": float(np.median(tokens)) if tokens else 0.0,
                           "max_tokens": max(tokens, default=0),
                           "same_length": sum(na[k] == nb[k] for k in both),
                           "compared": len(both)}
    for q in QUANTILES:
        x, y = (float(np.percentile(v, q)) if v else float("nan") for v in (la, lb))
        row |= {f"p{q}_live": x, f"p{q}_sim": y, f"p{q}_rel_error": _rel(x, y)}
    return row


def ranking(cells: pd.DataFrame, sim: str = "sim") -> tuple[int, int]:
    """(pairs ordered alike, pairs) by rollout-to-train-end within each shape; `sim`
    names the simulated column."""
    r2te = cells[cells.metric == "rollout_to_train_end_s"]
    alike = total = 0
    for _, shape in r2te.groupby("shape"):
        for (_, p), (_, q) in itertools.combinations(shape.iterrows(), 2):
            total += 1
            alike += np.sign(p.live - q.live) == np.sign(p[sim] - q[sim])
    return int(alike), total


def drift_summary(cells: pd.DataFrame, probes: pd.DataFrame) -> dict[str, Any]:
    """The decode step probed beside the cells: over the calibration's fit per probe
    and per cell (what the probed twin is scaled by), how closely a cell's factor
    follows its live over simulated rollout time (Pearson's r), how far the machine
    moved from the first probe, and the errors of the probed twins."""
    factor = drift.per_cell(probes)
    rollout = cells[cells.metric == "rollout_complete_s"].set_index("cell")
    slower = (rollout.live / rollout.sim).reindex(list(factor))
    values = np.array(list(factor.values()))
    follows = (float(np.corrcoef(values, slower)[0, 1]) if len(values) > 2 and values.std()
               and slower.std() else float("nan"))
    moved = list(drift.per_cell(probes, "drift").values())
    out = {"fit_ratio_min": float(probes.ratio.min()), "fit_ratio_max": float(probes.ratio.max()),
           "cell_factor_min": float(values.min()), "cell_factor_median": float(np.median(values)),
           "cell_factor_max": float(values.max()), "factor_follows_rollout_r": follows,
           "drift_min": min(moved), "drift_max": max(moved)}
    if "rel_error_probed" in cells:
        alike, pairs = ranking(cells, "sim_probed")
        out |= {"probed_median_rel_error": float(cells.rel_error_probed.median()),
                "probed_metric_median": cells.groupby("metric", sort=False)[
                    "rel_error_probed"].median().to_dict(),
                "probed_variant_median": cells.groupby("variant", sort=False)[
                    "rel_error_probed"].median().to_dict(),
                "probed_ranking_alike": alike, "probed_ranking_pairs": pairs}
    return out


def summary(cells: pd.DataFrame, requests: pd.DataFrame) -> dict[str, Any]:
    alike, pairs = ranking(cells)
    per = cells.groupby("variant", sort=False)["rel_error"].agg(["median", "max"])
    return {"median_rel_error": float(cells.rel_error.median()),
            "variant_median": per["median"].to_dict(), "variant_worst": per["max"].to_dict(),
            "ranking_alike": alike, "ranking_pairs": pairs,
            "p50_median_rel_error": float(requests.p50_rel_error.median()),
            "p90_median_rel_error": float(requests.p90_rel_error.median()),
            "same_length": int(requests.same_length.sum()),
            "compared_lengths": int(requests.compared.sum()),
            "metric_median": cells.groupby("metric", sort=False)["rel_error"].median().to_dict(),
            **scale(cells, requests)}


def scale(cells: pd.DataFrame, requests: pd.DataFrame) -> dict[str, float]:
    """How big the live work was: round length (rollout to train end, round mean),
    response tokens per cell (median) and the longest against that median."""
    rounds = cells[cells.metric == "rollout_to_train_end_s"].live
    tail = requests.max_tokens / requests.median_tokens
    return {"round_s_min": float(rounds.min()), "round_s_median": float(rounds.median()),
            "rounds_10s": int((rounds >= 10).sum()), "cells": int(len(rounds)),
            "median_tokens_min": float(requests.median_tokens.min()),
            "tail_ratio_min": float(tail.min())}


def figure(cells: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    titles = {"rollout_to_train_end_s": "rollout to train end (s)",
              "first_dispatch_s": "first dispatch (s)",
              "rollout_complete_s": "rollout complete (s)", "waiting_ratio": "waiting ratio"}
    fig, axes = plt.subplots(1, 4, figsize=(16, 4.6))
    palette = dict(zip(cells.variant.unique(),
                       sns.color_palette("tab20", cells.variant.nunique()), strict=True))
    for ax, metric in zip(axes, METRICS, strict=True):
        part = cells[cells.metric == metric]
        for variant, rows in part.groupby("variant", sort=False):
            ax.scatter(rows.live, rows.sim, s=22, color=palette[variant], label=variant)
        lo = float(min(part.live.min(), part.sim.min())) * 0.9
        hi = float(max(part.live.max(), part.sim.max())) * 1.1
        ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8)
        ax.fill_between([lo, hi], [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], color="grey",
                        alpha=0.12, lw=0)
        ax.set(title=titles[metric], xlabel="live", ylabel="simulated")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center right", fontsize=8, frameon=False)
    fig.suptitle("Simulated twin against live run, one point per cell (band: ±10%)")
    fig.tight_layout(rect=(0, 0, 0.86, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def frontier_figure(cells: list[Cell], table: pd.DataFrame, path: Path) -> bool:
    """CGP+FGD's rollout-to-train-end against its frontier F_w, live and simulated,
    with CGP's as flat lines; drawn when a shape has cgp and three or more
    frontiers. Returns whether it was drawn."""
    frontier = {c.name: c.config.frontier for c in cells if c.config.system == "cgp-fgd"}
    # cells of one workload, size and cache, wherever the grid put them
    where = {c.name: f"{c.config.workload} R={c.config.groups}, "
             f"{c.config.live.kv_cache_mb} MiB KV" for c in cells}
    r2te = table[table.metric == "rollout_to_train_end_s"].copy()
    r2te["shape"] = r2te.cell.map(where)
    shapes = [s for s, part in r2te.groupby("shape")
              if part.cell.map(frontier).nunique() >= 3 and (part.system == "cgp").any()]
    if not shapes:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(shapes), figsize=(6 * len(shapes), 4.2), squeeze=False)
    for ax, shape in zip(axes[0], shapes, strict=True):
        part = r2te[r2te["shape"] == shape]
        fgd = part[part.system == "cgp-fgd"].assign(fw=lambda d: d.cell.map(frontier))
        fgd = fgd.sort_values("fw")
        cgp = part[part.system == "cgp"].iloc[0]
        for side, colour in (("live", "tab:blue"), ("sim", "tab:orange")):
            label = "live" if side == "live" else "simulated"
            ax.plot(fgd.fw, fgd[side], marker="o", color=colour, label=f"CGP+FGD {label}")
            ax.axhline(cgp[side], color=colour, ls="--", lw=1, label=f"CGP {label}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(fgd.fw), [str(int(v)) for v in fgd.fw])
        ax.set(title=shape, xlabel="frontier F_w (groups in service)",
               ylabel="rollout to train end (s, round mean)")
        ax.legend(fontsize=8)
    fig.suptitle("Does a narrow frontier starve the engine? CGP+FGD against CGP")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def noise_floor(probes: pd.DataFrame) -> float:
    """How far the machine moved within one cell: per cell, the step probed after it
    over the one probed before it (geometric mean over the probe's batches), as a
    relative change; the median over cells. No twin can be closer than this on
    average, since it is the live run's own conditions changing under it."""
    moves = []
    for _, part in probes.groupby("cell", sort=False):
        before = part[part["when"] == "before"].set_index("batch").step_s
        after = part[part["when"] == "after"].set_index("batch").step_s
        both = before.index.intersection(after.index)
        if len(both):
            moves.append(abs(float(np.exp(np.log(after[both] / before[both]).mean())) - 1))
    return float(np.median(moves)) if moves else float("nan")


def headline(cells: pd.DataFrame, s: dict[str, Any]) -> str:
    """One number to trust, first in summary.md. The probed twin's error when the
    grid probed the step beside its cells: over every grid measured it was the
    steadier figure (docs/validation.md, "Which number to trust"), since one
    calibration's error also carries how far the machine moved after it."""
    if "probed_median_rel_error" in s:
        text = (f"**Headline: the simulated twin is within {s['probed_median_rel_error']:.1%} "
                f"of the live runs** (median |error| over {len(cells)} cell-metrics, each "
                "twin's decode step probed beside its cell)")
        floor = s.get("noise_floor", float("nan"))
        if floor == floor:
            text += (f"; noise floor {floor:.1%}, the machine's own move between the probes "
                     "before and after a cell (median)")
        return (text + f"; with one calibration for the whole grid: "
                f"{s['median_rel_error']:.1%}. Why this number: docs/validation.md.")
    return (f"**Headline: the simulated twin is within {s['median_rel_error']:.1%} of the live "
            f"runs** (median |error| over {len(cells)} cell-metrics, one calibration for the "
            "whole grid; no probes beside the cells, so the machine's drift is in it and no "
            "noise floor is known). Why this number: docs/validation.md.")


def calibration_line(s: dict[str, Any]) -> str | None:
    """What the calibration check (run.py `_calibrate`) decided, if it ran."""
    rows = s.get("calibration_check")
    if not rows:
        return None
    used = next(r for r in rows if r["used"])
    tried = f"attempt {used['attempt']} of {len(rows)}"
    if used["ok"]:
        return (f"- calibration checked before the grid: {tried} held (fit "
                f"{used['fit_rel_rms']:.1%} rms, two probes just after it "
                f"{used['probe_level']:.2f}x the fit, probe noise {used['probe_noise']:.1%})")
    return (f"- warning: no calibration held in {len(rows)} attempts; the grid used "
            f"{tried}, whose probes came closest ({used['why']}); the one-calibration errors "
            "below carry it")


def markdown(cells: pd.DataFrame, requests: pd.DataFrame, s: dict[str, Any]) -> str:
    lines = [headline(cells, s), "",
             f"- median |relative error| over {len(cells)} cell-metrics: "
             f"{s['median_rel_error']:.1%}",
             f"- ranking by rollout-to-train-end alike in {s['ranking_alike']}/"
             f"{s['ranking_pairs']} pairs",
             f"- request latency P50 median error {s['p50_median_rel_error']:.1%}, "
             f"P90 {s['p90_median_rel_error']:.1%}",
             f"- finished samples of equal length on both sides: {s['same_length']}/"
             f"{s['compared_lengths']}",
             "- per metric (median error): " + ", ".join(
                 f"{m} {e:.1%}" for m, e in s["metric_median"].items()),
             f"- live rounds: shortest {s['round_s_min']:.1f} s, median "
             f"{s['round_s_median']:.1f} s, {s['rounds_10s']}/{s['cells']} cells at 10 s or "
             f"more (the scale asked for); per cell, median response "
             f"{s['median_tokens_min']:.0f} tokens or more and the longest "
             f"{s['tail_ratio_min']:.1f}x that median or more"]
    if "calibration_fit_rel_rms" in s:
        rms = s["calibration_fit_rel_rms"]
        lines.append(f"- calibration.toml: the decode model fits its {s['calibration_points']} "
                     f"microbenchmarks within {rms:.1%} rms" + (
                         f" (over {NOISY_FIT:.0%}: the machine was likely busy while it was "
                         "measured; errors below carry that noise)" if rms > NOISY_FIT else ""))
    checked = calibration_line(s)
    if checked is not None:
        lines.append(checked)
    if "cell_factor_median" in s:
        r = s["factor_follows_rollout_r"]
        lines.append(
            f"- decode step probed beside each cell (probe.csv), over the calibration's fit: "
            f"{s['fit_ratio_min']:.2f}-{s['fit_ratio_max']:.2f}x a probe, "
            f"{s['cell_factor_min']:.2f}-{s['cell_factor_max']:.2f}x a cell (median "
            f"{s['cell_factor_median']:.2f}x" + ("" if np.isnan(r) else
                                                 f", following its live/simulated rollout "
                                                 f"time at r = {r:.2f}")
            + f"); a cell's probes over the grid's first: {s['drift_min']:.2f}-"
            f"{s['drift_max']:.2f}x")
    if "probed_median_rel_error" in s:
        lines.append(
            f"- with each twin's decode step scaled by its cell's probes: median error "
            f"{s['probed_median_rel_error']:.1%} (" + ", ".join(
                f"{m} {e:.1%}" for m, e in s["probed_metric_median"].items())
            + f"), ranking alike in {s['probed_ranking_alike']}/{s['probed_ranking_pairs']} "
            "pairs")
    if s.get("tail_step_ratio"):
        lines.append("- decode step after the last admission, live over simulated, by running "
                     "sequences (all cells, tail.csv): " + ", ".join(
                         f"{tail.label(b)}: {r:.2f}" for b, r in s["tail_step_ratio"].items()))
    # Bullets wrapped to 100 columns (the terminal shows them as they are written).
    lines = [textwrap.fill(line, 100, subsequent_indent="  ") for line in lines]
    probed = s.get("probed_variant_median", {})
    extra = (" step probed beside it |", "---|") if probed else ("", "")
    lines += ["", "| variant | median error | worst |" + extra[0], "|---|---|---|" + extra[1]]
    for v, med in s["variant_median"].items():
        cell = f" {probed[v]:.1%} |" if v in probed else ""
        lines.append(f"| {v} | {med:.1%} | {s['variant_worst'][v]:.1%} |{cell}")
    return "\n".join(lines) + "\n"


def write(cells: list[Cell], traces: dict[str, tuple[list[dict], list[dict]]], out: Path,
          probes: pd.DataFrame | None = None, calibration: Path | None = None,
          probed: dict[str, list[dict]] | None = None) -> dict[str, Any]:
    """The tables, summary and figures; `probes` (`drift.table`) adds the decode step
    probed beside the cells, `probed` the twins scaled by it (every cell's, or none),
    `calibration` how well its decode fit held over its own microbenchmarks."""
    probed = probed if probed and len(probed) == len(cells) else {}
    rows = [r for c in cells for r in cell_rows(c, *traces[c.name], probed.get(c.name))]
    table = pd.DataFrame(rows)
    requests = pd.DataFrame([request_row(c, *traces[c.name]) for c in cells])
    s = summary(table, requests)
    if probes is not None and not probes.empty:
        s |= drift_summary(table, probes)
        s["noise_floor"] = noise_floor(probes)
    check = out / "calibration-check.csv"
    if check.exists():
        s["calibration_check"] = pd.read_csv(check, keep_default_na=False).to_dict("records")
    fit = drift.decode_of(calibration) if calibration is not None else {}
    if "fit_rel_rms" in fit:  # written by `calibrate engine` since 2026-11
        s |= {"calibration_fit_rel_rms": float(fit["fit_rel_rms"]),
              "calibration_points": int(fit.get("points", 0))}
    steps = tail.table(traces)
    s["tail_step_ratio"] = {int(r.batch_at_most): float(r.live_over_sim)
                            for r in tail.overall(steps).itertuples()}
    write_atomic(out / "validate.csv", table.to_csv(index=False, float_format="%.6g"))
    write_atomic(out / "tail.csv", steps.to_csv(index=False, float_format="%.6g"))
    write_atomic(out / "requests.csv", requests.to_csv(index=False, float_format="%.6g"))
    write_atomic(out / "summary.md", markdown(table, requests, s))
    figure(table, out / "validation.png")
    s["frontier_figure"] = frontier_figure(cells, table, out / "frontier.png")
    return s
