"""The analysis commands of `rolloutbench`: timeline, gantt, compare, plot.
The logic lives in harness.analysis; this file only parses options, reports
errors as one line (exit 2), and writes outputs atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from harness.analysis import InputError
from harness.cli.common import (
    CSV_HELP,
    JSON_HELP,
    console,
    fail,
    output_format,
    refuse_existing,
    refuse_overwrite,
    shown,
    trace_of,
    warning,
    wrap,
)
from harness.core.progress import late_stage
from harness.core.trace import TraceError, read_prefix

commands = typer.Typer()  # added to the app in harness/cli/app.py

FIGURE_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg")


def _events(trace: Path) -> list[dict[str, Any]]:
    try:  # as far as it goes: a last line cut mid-write left out, said below
        with late_stage(f"reading {trace}"):
            cut = read_prefix(trace, allow_cut=True)
    except TraceError as err:
        fail(str(err))
    events = cut.events
    if not cut.complete:  # a run killed or stopped: drawn as far as it goes, said so
        warning(f"{trace}: incomplete trace ({cut.problem()}); drawn as far as it goes")
    return events


def _timed(events: list[dict[str, Any]], trace: Path) -> list[dict[str, Any]]:
    """The events of a trace that holds times: an imported one without them (every
    event at t = 0) would draw an empty figure, so it is refused, as `metrics` leaves
    its time figures out."""
    from harness.core.metrics import untimed

    if untimed(events[0]):
        fmt = events[0]["import"].get("format", "another system's")
        fail(f"{trace}: no times to draw (imported from {fmt} logs, which hold none)")
    return events


def _figure_path(out: Path) -> None:
    if out.suffix.lower() not in FIGURE_SUFFIXES:
        fail(f"--out: {out}: unknown figure type {out.suffix or '(none)'!r} "
             f"(expected one of {', '.join(FIGURE_SUFFIXES)})")


def _draw(out: Path, make: Any) -> None:
    """Build a figure with `make()` and save it to OUT; either failure is one line."""
    from harness.core.plots import save_figure

    _figure_path(out)
    try:
        with late_stage(f"drawing {out}"):
            fig = make()
    except InputError as err:
        fail(str(err))
    try:
        with late_stage(f"writing {out}"):
            save_figure(fig, out)
    except OSError as err:
        fail(f"--out: {out}: cannot write ({err.strerror})")
    console.print(f"wrote {out}", highlight=False)


@commands.command("timeline")
def timeline_cmd(
    trace: Annotated[Path, typer.Argument(help="Trace (JSON lines, plain or .zst), or a "
                                          "run folder (its trace).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output .json (trace-event format).")],
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing --out.")]
    = False,
) -> None:
    """Chrome/Perfetto trace-event JSON of a trace: engine request slots, groups,
    batches, optimizer steps, and running/waiting/KV counters. Open it in
    https://ui.perfetto.dev or chrome://tracing."""
    import json

    from harness.analysis.timeline import timeline
    from harness.core.files import write_atomic

    trace = trace_of(trace)
    refuse_overwrite("--out", out, [("TRACE", trace)])
    if out.suffix != ".json":
        fail(f"--out: {out}: the trace-event format is one JSON document; name it .json")
    refuse_existing("--out", out, force)  # (a run's metrics.json went without a word)
    events = _timed(_events(trace), trace)
    with late_stage(f"timeline: the slices and counters of {len(events):,} events"):
        doc = timeline(events)
    try:
        with late_stage(f"writing {out}"):
            write_atomic(out, json.dumps(doc, separators=(",", ":")) + "\n")
    except OSError as err:
        fail(f"--out: {out}: cannot write ({err.strerror})")
    events = doc["traceEvents"]
    requests = sum(1 for e in events if e.get("cat") == "request" and e["ph"] == "X"
                   and e["name"] not in ("queued", "running"))
    console.print(f"wrote {out}: {len(events)} events, {requests} request slices "
                  f"(open in https://ui.perfetto.dev)", highlight=False)


@commands.command("gantt")
def gantt_cmd(
    trace: Annotated[Path, typer.Argument(help="Trace (JSON lines, plain or .zst), or a "
                                          "run folder (its trace).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output figure (.png, .pdf, .svg).")],
    round_: Annotated[int | None, typer.Option(
        "--round", help="Which round." + shown("the first"))] = None,
) -> None:
    """A Gantt figure of one round (as RolloutPipe's Fig. 1(b)/3): requests by
    group, group hand-offs, batch dispatches and the trainer's batches."""
    from harness.analysis.gantt import gantt_figure

    _figure_path(out)
    trace = trace_of(trace)
    refuse_overwrite("--out", out, [("TRACE", trace)])
    events = _timed(_events(trace), trace)
    _draw(out, lambda: gantt_figure(events, round_))


@commands.command("compare")
def compare_cmd(
    a: Annotated[str, typer.Argument(help="A: a trace (.jsonl or .jsonl.zst), a result "
                                     "set (.csv, .parquet, .json) or a directory of traces.")],
    b: Annotated[str, typer.Argument(help="B: the same kinds as A.")],
    per_round: Annotated[bool, typer.Option(
        "--per-round", help="One row per round and metric (rounds both have), not the "
                            "mean over rounds.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    csv_out: Annotated[bool, typer.Option("--csv", help=CSV_HELP)] = False,
) -> None:
    """Every metric of A and B, the difference B − A and the relative difference
    (B − A) / |A|; the mean over rounds unless --per-round. Each mean comes with its
    spread over seeds: the sample sd from 2 seeds, a 95% t-interval from 3."""
    from harness.analysis.compare import compare, describe, load_rows, pooling, unrelated
    from harness.cli.tables import compare_table, emit

    fmt = output_format(json_out, csv_out)
    cut: list[str] = []  # a trace that stops short, said once each
    try:
        with late_stage(f"reading {a} and {b}"):
            rows_a, rows_b = load_rows(a, cut.append), load_rows(b, cut.append)
        rows = compare(rows_a, rows_b, per_round=per_round)
    except InputError as err:
        fail(str(err))
    apart = unrelated(rows_a, rows_b)
    for line in [*dict.fromkeys(cut), *([apart] if apart else []),
                 *pooling(rows_a, rows_b)]:
        warning(line)
    if fmt == "table":
        for side, rows_of in ((f"A: {a}", rows_a), (f"B: {b}", rows_b)):  # 120-199 cols
            console.print(wrap(f"{side}  {describe(rows_of)}"), highlight=False, markup=False)
    emit(console, rows, fmt, compare_table)


@commands.command("plot")
def plot_cmd(
    results: Annotated[Path, typer.Argument(help="Results table (.csv, .parquet, .json): "
                                            "a sweep's results or a reproduction CSV.")],
    x: Annotated[str, typer.Option("--x", help="Column on the x axis (e.g. groups).")],
    y: Annotated[str, typer.Option("--y", help="Metric column (e.g. waiting_ratio).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output figure (.png, .pdf, .svg).")],
    hue: Annotated[str | None, typer.Option(
        "--hue", help="Column for colours." + shown("system, if there is one"))] = None,
    where: Annotated[list[str] | None, typer.Option(
        "--where", help="Keep rows with FIELD=VALUE (repeatable).")] = None,
) -> None:
    """A seaborn line plot of a metric over a field, one line per --hue, with
    markers and the 95% confidence interval over repeats (seeds, rounds)."""
    from harness.analysis.plot import parse_where, plot_figure

    refuse_overwrite("--out", out, [("RESULTS", results)])
    _draw(out, lambda: plot_figure(results, x, y, hue, parse_where(where or []), warning))
