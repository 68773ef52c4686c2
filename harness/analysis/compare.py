"""Two runs side by side, metric by metric.

Why: "did this change help?" is a difference of metrics between two runs (two
systems, two configs, a run and a reproduction CSV). Each side is a trace, a
directory of traces, or a result set; both become the same per-round rows
(`harness.core.metrics.round_metrics`), so a trace and the table made from it
compare as equal.

Rows are either per metric over all rows (the mean, NaN skipped: rounds whose
metric is undefined do not count) or per round and metric (`per_round`),
aligned on the round number. Each mean comes with its spread over seeds
(`harness.analysis.spread`): a seed's rows are averaged first, then the seeds; the
sample standard deviation where there are two seeds or more, a 95% t-interval where
there are three or more, and for B − A the same over the seeds both sides ran (paired:
systems run with one seed see the same prompts). A row's seed is its trace's, or the
result set's `seed` column; rows without one are one seed. A streaming run's rows (with a `phase`,
harness.core.streaming) count in the mean only where `steady`, when it has a
steady round: its warm-up and drain say how the run started and ended, not
what the system sustains.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.analysis import InputError
from harness.analysis.spread import spread
from harness.analysis.tables import TABLE_SUFFIXES, read_table
from harness.core.metrics import KEYS, OFFPOLICY_KEYS, round_metrics
from harness.core.trace import TraceError, read_prefix
from harness.core.yardstick import KEYS as YARD_KEYS
from harness.core.yardstick import delivered

TRACE_SUFFIXES = (".jsonl", ".jsonl.zst")  # plain or zstd (harness.core.trace_io)
DIR_TABLES = ("results.parquet", "results.csv", "metrics.json")  # tried in this order


def _trace_rows(paths: list[Path], warn: Callable[[str], None] | None = None
                ) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in paths:
        try:  # as far as it goes: a last line cut mid-write left out, said below
            cut = read_prefix(path, allow_cut=True)
        except TraceError as err:
            raise InputError(str(err)) from None
        events = cut.events
        if not cut.complete and warn is not None:
            warn(f"{path}: incomplete trace ({cut.problem()}); its rows as far as it goes")
        seed = events[0].get("seed") if events else None  # the run_start header's
        fig = delivered(events)  # what the run delivered: on every row of the trace
        whole = {k: fig[k] for k in YARD_KEYS}
        rows += [{**row, **whole, "seed": seed} for row in round_metrics(events)]
    return rows


def _is_trace(path: Path) -> bool:
    return path.name.lower().endswith(TRACE_SUFFIXES)


def _one_form_each(traces: list[Path]) -> list[Path]:
    """The traces, a run's compressed and plain forms side by side (`trace-convert`
    into its folder) read once: the compressed one, as `find_trace` takes it. Both read,
    the run's rows counted twice."""
    have = set(traces)
    return [p for p in traces if not (p.suffix == ".jsonl" and p.with_name(p.name + ".zst")
                                      in have)]


def load_rows(source: str | os.PathLike[str], warn: Callable[[str], None] | None = None
              ) -> list[dict[str, Any]]:
    """Per-round metric rows from a trace (.jsonl or .jsonl.zst), a result set (CSV, Parquet,
    JSON), or a directory: its traces (searched recursively), else its
    results.parquet, results.csv or metrics.json. `warn` gets a line for each trace
    that stops short (no `run_end`: a run killed or stopped), read as far as it goes."""
    path = Path(source)
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    if path.is_dir():
        traces = _one_form_each(sorted(p for p in path.rglob("*.jsonl*")
                                       if p.is_file() and _is_trace(p)))
        if traces:
            return _trace_rows(traces, warn)
        for name in DIR_TABLES:
            if (path / name).is_file():
                return load_rows(path / name, warn)
        raise InputError(f"{path}: no traces (*.jsonl, *.jsonl.zst) and none of "
                         f"{', '.join(DIR_TABLES)}")
    suffix = path.suffix.lower()
    if _is_trace(path):
        return _trace_rows([path], warn)
    if suffix not in TABLE_SUFFIXES:
        raise InputError(f"{path}: unknown file type {suffix or '(none)'!r} (expected a "
                         f"trace .jsonl, .jsonl.zst or a result set {', '.join(TABLE_SUFFIXES)})")
    frame = read_table(path)
    if not any(k in frame.columns for k in KEYS):
        raise InputError(f"{path}: no metric columns (expected some of {', '.join(KEYS)})")
    frame = frame.astype(object).where(frame.notna(), float("nan"))
    return frame.to_dict(orient="records")


def metric_names(a: list[dict[str, Any]], b: list[dict[str, Any]],
                 per_round: bool = False) -> list[str]:
    """The yardstick's figures first where both sides are traces (what each run
    delivered over its steady window: the figures to judge systems by; not per round);
    then KEYS always (the papers' per-round metrics; a side without one shows NaN); the
    off-policy keys where both sides have them (older result sets lack them)."""
    have_a = {k for row in a for k in row}
    have_b = {k for row in b for k in row}
    yard = [] if per_round else [k for k in YARD_KEYS if k in have_a and k in have_b]
    return [*yard, *KEYS, *[k for k in OFFPOLICY_KEYS if k in have_a and k in have_b]]


def _number(value: Any) -> float:
    if value is None or isinstance(value, bool):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _mean(values: list[float]) -> float:
    values = [v for v in values if not math.isnan(v)]
    return sum(values) / len(values) if values else math.nan


def steady(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows a mean is over: a streaming run's steady rounds (when it has any),
    every row of any other."""
    kept = [r for r in rows if r.get("phase") not in ("warm-up", "drain")]
    return kept or rows


def means(rows: list[dict[str, Any]], names: list[str]) -> dict[str, float]:
    """Each metric's mean over the rows (NaN skipped: a round without it does not
    count), a streaming run's over its steady rounds (`steady`)."""
    kept = steady(rows)
    return {m: _mean([_number(r.get(m)) for r in kept]) for m in names}


def _seeds(rows: list[dict[str, Any]], metric: str) -> dict[Any, float]:
    """Seed -> the mean of `metric` over that seed's rows (NaN skipped)."""
    by_seed: dict[Any, list[float]] = defaultdict(list)
    for row in rows:
        seed = _number(row.get("seed"))
        by_seed["-" if math.isnan(seed) else int(seed)].append(_number(row.get(metric)))
    return {seed: _mean(values) for seed, values in by_seed.items()}


def _row(round_: Any, metric: str, rows_a: list[dict[str, Any]],
         rows_b: list[dict[str, Any]]) -> dict[str, Any]:
    """One metric of A and B: each side's mean over its seeds with the spread, the
    difference of the means with its spread over the seeds both sides have."""
    seeds_a, seeds_b = _seeds(rows_a, metric), _seeds(rows_b, metric)
    sa, sb = spread(list(seeds_a.values())), spread(list(seeds_b.values()))
    a, b = sa["mean"], sb["mean"]
    diff = b - a
    if math.isnan(diff):
        rel = math.nan
    elif a == 0:
        rel = 0.0 if diff == 0 else math.nan  # undefined, not infinite
    else:
        rel = diff / abs(a)
    paired = spread([seeds_b[s] - seeds_a[s] for s in seeds_a if s in seeds_b and s != "-"])
    out: dict[str, Any] = {"round": round_, "metric": metric}
    for side, st in (("a", sa), ("b", sb)):
        out.update({side: st["mean"], f"{side}_sd": st["sd"], f"{side}_seeds": st["n"],
                    f"{side}_ci_low": st["ci_low"], f"{side}_ci_high": st["ci_high"]})
    out.update(diff=diff, diff_sd=paired["sd"], diff_seeds=paired["n"],
               diff_ci_low=paired["ci_low"], diff_ci_high=paired["ci_high"], rel_diff=rel)
    return out


def _rounds(rows: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        r = _number(row.get("round"))
        if not math.isnan(r):  # a failed sweep cell has no round
            out[int(r)].append(row)
    return out


def compare(a: list[dict[str, Any]], b: list[dict[str, Any]],
            per_round: bool = False) -> list[dict[str, Any]]:
    """Rows of round ('mean' or a round number), metric, a, b (means over seeds) with
    their spread (`_row`), diff = b − a and rel_diff = (b − a) / |a| (NaN where a is 0
    and they differ)."""
    names = metric_names(a, b, per_round)
    if not per_round:
        kept_a, kept_b = steady(a), steady(b)
        return [_row("mean", m, kept_a, kept_b) for m in names]
    ra, rb = _rounds(a), _rounds(b)
    common = sorted(set(ra) & set(rb))
    if not common:
        raise InputError(f"--per-round: no round in common (A has {sorted(ra)}, "
                         f"B has {sorted(rb)})")
    return [_row(r, m, ra[r], rb[r]) for r in common for m in names]


def seed_count(rows: list[dict[str, Any]]) -> int:
    """How many seeds a side holds (rows without a seed: one)."""
    return len(_seeds(rows, "round"))


def describe(rows: list[dict[str, Any]]) -> str:
    """A short label for a side: its systems and workloads, and how many rows."""
    systems = sorted({str(r["system"]) for r in rows if r.get("system") is not None})
    workloads = sorted({str(r["workload"]) for r in rows if r.get("workload") is not None})
    parts = [",".join(systems[:3]) + ("…" if len(systems) > 3 else ""),
             ",".join(workloads[:3]) + ("…" if len(workloads) > 3 else "")]
    kept = len(steady(rows))
    phased = any("phase" in r for r in rows)
    means = (f"; means over its {kept} steady rounds" if kept < len(rows)
             else "; no steady round: means over all" if phased
             and not any(r.get("phase") == "steady" for r in rows) else "")
    seeds = seed_count(rows)
    return (" ".join(p for p in parts if p)
            + f" ({len(rows)} rows, {seeds} seed{'s' if seeds != 1 else ''}{means})")


def _facts(rows: list[dict[str, Any]]) -> tuple[set[str], set[str], int]:
    systems = {str(r["system"]) for r in rows if r.get("system") is not None}
    workloads = {str(r["workload"]) for r in rows if r.get("workload") is not None}
    return systems, workloads, len(_rounds(rows))


def unrelated(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> str | None:
    """One line when A and B share no system, no workload and not their number of
    rounds (two unrelated runs, most likely a wrong path); None otherwise. They
    are still compared: the user may mean it."""
    (sa, wa, ra), (sb, wb, rb) = _facts(a), _facts(b)
    if not (sa and sb and wa and wb) or sa & sb or wa & wb or ra == rb:
        return None
    return (f"A and B share no system ({','.join(sorted(sa))} vs {','.join(sorted(sb))}), "
            f"no workload ({','.join(sorted(wa))} vs {','.join(sorted(wb))}) and not their "
            f"rounds ({ra} vs {rb}): unrelated runs?")


def pooling(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[str]:
    """Lines a reader of the means should see: a side that pools several systems or
    workloads (its means are over all of them), and two single runs that differ in
    more than the system (their workloads or number of rounds)."""
    out = []
    facts = {"A": _facts(a), "B": _facts(b)}
    for side, (systems, workloads, _) in facts.items():
        for what, names in (("systems", systems), ("workloads", workloads)):
            if len(names) > 1:
                out.append(f"{side} pools {len(names)} {what} ({', '.join(sorted(names))}): "
                           f"its means are over all of them (compare one cell's traces)")
    (sa, wa, ra), (sb, wb, rb) = facts["A"], facts["B"]
    if len(wa) == len(wb) == 1 and wa != wb and not unrelated(a, b):
        out.append(f"A and B differ in workload ({next(iter(wa))} vs {next(iter(wb))}), "
                   f"not only in system")
    if ra != rb and len(sa) == len(sb) == 1 and not unrelated(a, b):
        out.append(f"A and B have {ra} and {rb} rounds: the means are over different rounds")
    return out
