"""`rolloutbench check TRACE`: the properties a scheduler promises, one line each.
The logic lives in harness.analysis.check; this file parses options, prints, writes
the JSON report atomically, and sets the exit code (0 every property judged held, 1
one failed, 2 bad input, 3 none could be judged: `NOTHING_JUDGED`)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Annotated, Any

import typer

from harness.cli.common import fail, refuse_overwrite, shown, trace_of
from harness.core.trace import Trace, TraceError, read_prefix

commands = typer.Typer()  # added to the app in harness/cli/app.py

WIDTH = 100
NOTHING_JUDGED = 3  # exit code: no property judged (no bound stated, nothing to judge on)


def _read(trace: Path) -> Trace:
    """The trace as far as it goes (a last line cut mid-write left out: `tally` says so)."""
    from harness.core.progress import late_stage

    try:
        with late_stage(f"reading {trace}"):
            return read_prefix(trace, allow_cut=True)
    except TraceError as err:
        fail(str(err))
    raise AssertionError  # unreachable: fail() exits


def _number(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def line(result: Any) -> str:
    """One property on one line of at most WIDTH columns: status, value against the
    bound and where it came from, and where it first failed. A property not checked
    has neither value nor bound: its line is why (the trace's or its source's gap),
    which the bound's columns would otherwise crowd out."""
    if result.status == "not checked":  # the why, whole: wrapped under its column
        head = f"{result.name:<12} {result.status:<15} "
        return textwrap.fill(result.detail, WIDTH, initial_indent=head,
                             subsequent_indent=" " * len(head))
    value = "-" if result.value is None else _number(result.value)
    bound = "none" if result.bound is None else _number(result.bound)
    text = f"{result.name:<12} {result.status:<15} {value} {result.unit}; bound {bound} " \
           f"({result.source})"
    if result.first is not None:
        f = result.first
        text += f"; first at t={f['t']:.6g}"
        text += f" group {f['group']}" if f.get("group") is not None else ""
        text += f" batch {f['batch']}" if f.get("batch") is not None else ""
    elif len(text) + len(result.detail) + 2 <= WIDTH:
        text += f"; {result.detail}"
    return text if len(text) <= WIDTH else text[:WIDTH - 3] + "..."


def tally(results: list[Any], events: list[dict[str, Any]], cut_line: int | None = None
          ) -> str:
    """The closing line: how many properties were judged (held to a bound) and how many
    failed, so that a trace whose source records too little to judge does not read as a
    clean pass, and one that judged none says so; and a trace with no run_end (cut short,
    or still being written), one whose run_end names an error (a Ctrl-C) and one whose
    last line was cut mid-write (`cut_line`, left out) say so. Wrapped at WIDTH."""
    judged = [r for r in results if r.passed is not None]
    failed = sum(1 for r in judged if r.passed is False)
    text = f"{len(judged)} of {len(results)} properties judged, {failed} failed"
    if not judged:
        text += ": nothing judged, which is not a pass"
    if not events or events[-1].get("ev") != "run_end":
        text += "; the trace has no run_end (a run cut short?)"
    elif "error" in events[-1]:
        text += f"; the run ended with an error ({json.dumps(events[-1]['error'])})"
    if cut_line is not None:
        text += f"; its line {cut_line} was cut mid-write and is left out"
    return textwrap.fill(text, WIDTH, subsequent_indent="  ", break_on_hyphens=False)


@commands.command("check")
def check_cmd(
    trace: Annotated[Path, typer.Argument(help="Trace (JSON lines, plain or .zst): "
                                          "simulated, live or imported; or a run folder.")],
    json_out: Annotated[Path | None, typer.Option(
        "--json", help="Write the full report (every field) to this JSON file.")] = None,
    bound: Annotated[int | None, typer.Option(
        "--bound", min=0, help="Staleness bound in optimizer steps."
        + shown("the system's staleness_bound(cfg)"))] = None,
    max_backlog: Annotated[int | None, typer.Option(
        "--max-backlog", min=0, help="Most samples generated but not yet trained."
        + shown("the system's backlog_bound(cfg) (areal, skyrl-async, tinker: their "
                "gate's (S+1) x U x K), else (L+1) x groups per step x K"))] = None,
    max_wait: Annotated[int | None, typer.Option(
        "--max-wait", min=0, help="Most optimizer steps a group may wait untrained."
        + shown("the staleness bound"))] = None,
) -> None:
    """Check a trace against what its scheduler promises: staleness bound, backlog,
    starvation, length bias, throughput after barriers. One line per property. Exit 0
    when every property judged held, 1 when one failed, 2 for bad input, 3 when none
    could be judged (no bound stated, or nothing in the trace to judge on: not a
    pass). docs/check.md says how each is measured."""
    from harness.analysis.check import Limits, check_events, report
    from harness.core.files import write_atomic

    trace = trace_of(trace)
    refuse_overwrite("--json", json_out, [("TRACE", trace)])
    read = _read(trace)
    events = read.events
    results = check_events(events, Limits(bound, max_backlog, max_wait))
    doc = report(str(trace), events, results)
    if json_out is not None:
        try:
            write_atomic(json_out, json.dumps(doc, indent=1) + "\n")
        except OSError as err:
            fail(f"--json: {json_out}: cannot write ({err.strerror})")
    for result in results:
        typer.echo(line(result))
    typer.echo(tally(results, events, read.cut_line))
    if doc["passed"] is None:
        raise typer.Exit(NOTHING_JUDGED)
    if not doc["passed"]:
        raise typer.Exit(1)
