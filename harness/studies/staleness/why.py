"""Why, from the traces: the staleness study's explanations, derived from its summary.

Every sentence and table here is computed from the summary's figures (each a mean
over seeds of what `traces` reads from a run's trace), so a rerun of the study, with
whatever systems its spec names, writes its own explanation; nothing names a system
but the synchronous baselines that `buys` divides by. What is derived:

- `leaders`: per split and bound on the max lag, the answer's leading setting and
  its measured reasons: the trainer's and the engines' idle shares, the requests in
  flight per engine replica, the backlog, the share of generation thrown away, the
  share of the window spent installing weights, and its lag against its stated bound;
- `systems`: per system, the same figures' range over its settings and splits;
- `findings`: sentences, each with its numbers (which figures rank with throughput,
  which side waits on each split, which settings throw generation away, whose knob
  buys no throughput, which settings train as another system's, what weight sync costs);
- `buys`: per system and split, its best throughput within each bound on the max lag
  over the synchronous baseline's (the better of `BASELINES` at lag 0 on that split).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from harness.studies.staleness.summary import (
    LAG_BOUNDS,
    _in_split,
    _name,
    _splits,
    leading,
    within,
)

BASELINES = ("slime", "verl")  # the synchronous systems `buys` divides by
WASTE = 0.05  # a setting "throws generation away" above this share of what it generates
FLAT = 0.10  # a knob "buys nothing" when its settings' throughput spans less than this
SAME = 0.01  # a setting "trains as" a baseline's within this share, on every split
WIDTH = 100  # every line this module writes fits this many columns
# The summary's columns this module reads (an older summary.csv may lack the last two).
NEEDED = ("system", "split", "setting", "bound", "trained_tokens_per_s",
          "generated_tokens_per_s", "lag_mean", "lag_max", "trainer_idle", "rollout_idle",
          "in_flight", "backlog", "dropped_groups", "wasted_share", "sync_share")


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table, each column padded to its widest cell, numbers right-aligned;
    unpadded (the same table to a reader of the rendering) where padding would take a
    line past WIDTH columns."""
    cols = list(zip(header, *rows, strict=True))
    widths = [max(len(c) for c in col) for col in cols]
    right = [all(_numeric(c) for c in col[1:]) for col in cols]
    if sum(widths) + 3 * len(widths) + 1 > WIDTH:
        widths = [0] * len(widths)

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.rjust(w) if r else c.ljust(w)
                                 for c, w, r in zip(cells, widths, right, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 1) + ":" if r else "-" * (w + 2)
                          for w, r in zip(widths, right, strict=True)) + "|"
    return "\n".join([line(header), rule, *(line(r) for r in rows)]) + "\n"


def _numeric(cell: str) -> bool:
    return cell.replace(".", "", 1).replace("-", "", 1).replace("%", "").isdigit()


def _pct(share: float) -> str:
    return "-" if math.isnan(share) else f"{100 * share:.0f}%"


def _span(values: pd.Series, fmt: str = "{:.0f}", scale: float = 1.0) -> str:
    """'lo-hi' of a figure over settings ('lo' alone when they agree to the digits)."""
    v = values.dropna() * scale
    if v.empty:
        return "-"
    lo, hi = fmt.format(v.min()), fmt.format(v.max())
    return lo if lo == hi else f"{lo}-{hi}"


def _lag(row: pd.Series) -> str:
    """'1.48/2 (2)': mean lag / worst seed's max lag (the bound the run states, '-':
    none)."""
    bound = "-" if math.isnan(row["bound"]) else f"{row['bound']:g}"
    return f"{row['lag_mean']:.2f}/{row['lag_max']:g} ({bound})"


def leaders(summary: pd.DataFrame, bounds: Sequence[int] = LAG_BOUNDS) -> str:
    """The answer's leading settings with their figures (a Markdown table)."""
    rows = []
    for split, bound, ok in leading(summary, bounds):
        b = ok.iloc[0]
        idle = f"{_pct(b['trainer_idle'])[:-1]}/{_pct(b['rollout_idle'])}"
        rows.append([f"{split} L={bound}", _name(b), f"{b['trained_tokens_per_s'] / 1e3:.2f}",
                     idle, f"{b['in_flight']:.1f}", f"{b['backlog']:.0f}",
                     _pct(b["wasted_share"]), _pct(b["sync_share"]), _lag(b)])
    return table(["cell", "best", "k/s", "idle t/e", "in fl", "held", "waste", "sync",
                  "lag (bnd)"], rows)


def systems(summary: pd.DataFrame) -> str:
    """Per system, each figure's range over its settings and splits (a Markdown table)."""
    rows = []
    for system, s in summary.groupby("system", sort=False):
        stated = s["bound"].notna()
        kept = bool((s.loc[stated, "lag_max"] <= s.loc[stated, "bound"]).all())
        bound = ("none" if not stated.any() else "broken" if not kept
                 else "kept" if stated.all() else "some")
        idle = f"{_span(s['trainer_idle'], scale=100)}/{_span(s['rollout_idle'], scale=100)}"
        rows.append([str(system), _span(s["trained_tokens_per_s"], "{:.2f}", 1e-3), idle,
                     _span(s["in_flight"]), _span(s["backlog"]),
                     _span(s["wasted_share"], scale=100), _span(s["lag_max"]), bound])
    return table(["system", "k tok/s", "idle t/e %", "in fl", "held", "waste %", "lag max",
                  "bound"], rows)


def _ranks(summary: pd.DataFrame) -> str | None:
    """How throughput ranks with the engines' batch and idle share, split by split."""
    parts = []
    for split in _splits(summary):
        s = summary[summary["split"] == split].dropna(subset=["trained_tokens_per_s"])
        if len(s) < 3:
            continue
        fly = s["trained_tokens_per_s"].corr(s["in_flight"], method="spearman")
        idle = s["trained_tokens_per_s"].corr(s["rollout_idle"], method="spearman")
        parts.append(f"{split} {fly:.2f} / {idle:.2f} ({len(s)} settings)")
    if not parts:
        return None
    return ("How throughput ranks with the engines' batch (the requests each replica has in "
            "flight) and with their idle share, Spearman's rho over a split's own settings, "
            "in flight / idle: " + "; ".join(parts) + ".")


def _waits(summary: pd.DataFrame) -> list[str]:
    """Per split: the idle shares' ranges, and the fastest setting's."""
    out = []
    for split in _splits(summary):
        s = summary[summary["split"] == split].dropna(subset=["trained_tokens_per_s"])
        if s.empty:
            continue
        top = s.loc[s["trained_tokens_per_s"].idxmax()]
        rollout_bound = int((s["trainer_idle"] > s["rollout_idle"]).sum())
        out.append(
            f"On {split} the trainer idles {_span(s['trainer_idle'], scale=100)}% of the "
            f"window and the engines {_span(s['rollout_idle'], scale=100)}%; in "
            f"{rollout_bound} of {len(s)} settings the trainer waits more than the engines. "
            f"Its fastest, {_name(top)} ({top['trained_tokens_per_s'] / 1e3:.2f}k at max lag "
            f"{top['lag_max']:g}): trainer idle {_pct(top['trainer_idle'])}, engines "
            f"{_pct(top['rollout_idle'])}, {top['in_flight']:.1f} in flight a replica.")
    return out


def _wasters(summary: pd.DataFrame) -> str | None:
    """The settings that throw away more than WASTE of what they generate."""
    s = summary[summary["wasted_share"] > WASTE]
    if s.empty:
        return None
    parts = []
    for _, rows in s.groupby("system", sort=False):
        w = rows.loc[rows["wasted_share"].idxmax()]
        dropped = f"{w['dropped_groups']:.0f}"
        parts.append(f"{_name(w)} on {w['split']} throws away {_pct(w['wasted_share'])} "
                     f"({dropped} group{'' if dropped == '1' else 's'} dropped; "
                     f"{w['generated_tokens_per_s'] / 1e3:.1f}k tokens/s generated, "
                     f"{w['trained_tokens_per_s'] / 1e3:.1f}k trained)")
    return (f"Generation thrown away (over {_pct(WASTE)} of the tokens generated, at its "
            "worst setting): " + "; ".join(parts) + ".")


def _flat(summary: pd.DataFrame) -> str | None:
    """Systems whose knob moves throughput by less than FLAT on every split."""
    parts = []
    for system, s in summary.groupby("system", sort=False):
        if s["setting"].nunique() < 2:
            continue
        ratios = s.groupby("split")["trained_tokens_per_s"].agg(lambda v: v.max() / v.min())
        if ratios.notna().all() and (ratios < 1 + FLAT).all():
            parts.append(f"{system} (throughput {_span(s['trained_tokens_per_s'], '{:.2f}', 1e-3)}"
                         f"k, backlog {_span(s['backlog'])}, max lag {_span(s['lag_max'])})")
    if not parts:
        return None
    return (f"A knob that buys no throughput (its settings within {_pct(FLAT)} of each other "
            "on every split, while the lag moves): " + "; ".join(parts) + ".")


def _same(summary: pd.DataFrame) -> str | None:
    """Settings that train as an earlier system's setting (the summary's order: the
    spec's, synchronous systems first): the same max lag on every split and throughput
    within SAME of it. Each joins the first such setting that joins none itself."""
    keys = ["system", "setting"]
    tok = summary.pivot_table("trained_tokens_per_s", keys, "split", sort=False)
    lag = summary.pivot_table("lag_max", keys, "split", sort=False).reindex(tok.index)
    anchors: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for key in tok.index:
        for anchor, joined in anchors.items():
            if anchor[0] == key[0]:
                continue
            a, b = tok.loc[key], tok.loc[anchor]
            both = a.notna() & b.notna()
            if not both.any() or (a.notna() != b.notna()).any():
                continue
            if (lag.loc[key][both] != lag.loc[anchor][both]).any():
                continue
            gap = float(((a[both] - b[both]).abs() / b[both]).max())
            if gap < SAME:
                joined.append((f"{key[0]} {key[1]}", gap))
                break
        else:
            anchors[key] = []
    parts = [", ".join(n for n, _ in joined) + f" as {a[0]} {a[1]} (within "
             f"{100 * max(g for _, g in joined):.1f}%)"
             for a, joined in anchors.items() if joined]
    if not parts:
        return None
    return ("Settings that train as another system's, at the same max lag on every split: "
            + "; ".join(parts) + ".")


def _sync(summary: pd.DataFrame) -> str | None:
    s = summary.dropna(subset=["sync_share"])
    if s.empty:
        return None
    top = s.loc[s["sync_share"].idxmax()]
    said = (f"Installing weights takes at most {100 * top['sync_share']:.1f}% of a window "
            f"({_name(top)} on {top['split']}; median {100 * s['sync_share'].median():.1f}%)")
    return said + (": weight sync does not decide this ranking." if top["sync_share"] < WASTE
                   else ".")


def _unbounded(summary: pd.DataFrame) -> str | None:
    s = summary[summary["bound"].isna()]
    if s.empty:
        return None
    parts = [f"{system} {_span(rows['lag_max'])}" for system, rows in
             s.groupby("system", sort=False)]
    return ("Settings that state no bound on the lag (the knob bounds admission or "
            "concurrency, not a token's age), with their max lag: " + ", ".join(parts) + ".")


def findings(summary: pd.DataFrame) -> list[str]:
    """The derived sentences, each with its numbers, unwrapped."""
    found = [_ranks(summary), *_waits(summary), _wasters(summary), _flat(summary),
             _unbounded(summary), _same(summary), _sync(summary)]
    return [f for f in found if f]


def baselines(summary: pd.DataFrame) -> dict[str, pd.Series]:
    """Per split, the synchronous baseline: the faster of BASELINES' lag-0 settings."""
    out = {}
    for split in _splits(summary):
        pts = within(summary, split, 0)
        pts = pts[pts["system"].isin(BASELINES)]
        if not pts.empty:
            out[split] = pts.iloc[0]
    return out


def buys(summary: pd.DataFrame, bounds: Sequence[int] = LAG_BOUNDS) -> pd.DataFrame:
    """Per system and split: its best throughput within each bound on the max lag, over
    the split's synchronous baseline (NaN where no setting of it stays within)."""
    base = baselines(summary)
    rows = []
    for system in dict.fromkeys(summary["system"]):
        for split, b in base.items():
            pts = _in_split(summary, split)
            pts = pts[pts["system"] == system]
            row: dict[str, object] = {"system": system, "split": split}
            for bound in bounds:
                ok = pts[pts["lag_max"] <= bound]["trained_tokens_per_s"]
                row[f"L={bound}"] = (ok.max() / b["trained_tokens_per_s"] if not ok.empty
                                     else math.nan)
            rows.append(row)
    return pd.DataFrame(rows)


def _wrap(text: str, first: str = "- ", rest: str = "  ") -> str:
    import textwrap

    return textwrap.fill(text, WIDTH, initial_indent=first, subsequent_indent=rest,
                         break_on_hyphens=False, break_long_words=False)


def markdown(summary: pd.DataFrame) -> str:
    """The section 'Why, from the traces' and 'What each system buys', as Markdown."""
    base = baselines(summary)
    b = buys(summary)
    cols = [c for c in b.columns if c.startswith("L=")]
    spec = (set(summary.loc[summary["engine_kind"] == "speculative", "system"])
            if "engine_kind" in summary.columns else set())
    rows = [[r["system"] + (" *" if r["system"] in spec else ""), r["split"],
             *("-" if math.isnan(r[c]) else f"{r[c]:.2f}x" for c in cols)]
            for _, r in b.iterrows()]
    said = "; ".join(f"{s} {_name(r)} {r['trained_tokens_per_s'] / 1e3:.2f}k"
                     for s, r in base.items()) or "none was run, so nothing is divided"
    return "\n".join([
        "### Why, from the traces (derived by harness/studies/staleness/why.py)", "",
        *(_wrap(f) for f in findings(summary)), "",
        _wrap("Each leading setting of the answer. k/s: thousand tokens trained a second; "
              "idle t/e: the share of the window the trainer and the engines idle; in fl: "
              "requests in flight per engine replica; held: the backlog (samples generated, "
              "not yet trained); waste: the share of the tokens generated thrown away (whole "
              "run); sync: the share of the window installing weights; lag: mean / the worst "
              "seed's max (bnd: the bound the run states, '-' none).",
              "", ""), "", leaders(summary),
        _wrap("Per system, the same figures' range over its settings and splits (bound: "
              "kept, every setting states one and keeps it; some: the settings that state "
              "one keep it; none: no setting states one):", "", ""), "", systems(summary),
        "### What each system buys (derived)", "",
        _wrap("Per system and split: its best trained tokens per second among the settings "
              "whose every seed kept its max lag within L, over the synchronous baseline "
              f"(the faster of {' and '.join(BASELINES)} at lag 0: {said}); '-': no setting "
              "within L" + ("; *: on a speculative engine (sim.spec_*), its gain the "
                            "engine's as much as its schedule's" if spec else "") + ".",
              "", ""), "",
        table(["system", "split", *cols], rows) if base else ""])


def report(summary: pd.DataFrame) -> str:
    """What the study writes to summary.md: the answer's tables, then `markdown`."""
    from harness.studies.staleness.summary import markdown as tables

    return tables(summary) + "\n" + markdown(summary)
