"""`rolloutbench regress`: recompute the baseline grid and compare its scheduling
metrics with results/baselines/ (or accept them with --update); the logic lives
in harness.studies.regress."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from harness.cli.common import console, fail, output_format, shown
from harness.cli.tables import machine, show
from harness.core.config import ConfigError
from harness.core.registry import UnknownName
from harness.studies.regress import DEFAULT_DIR, Report, RowKey, regress, update

commands = typer.Typer()  # added to the app in harness/cli/app.py


def _num(value: float) -> str:
    return "nan" if math.isnan(value) else f"{value:.10g}"


def _by_cell(keys: list[RowKey]) -> list[str]:
    """(cell, round) pairs as 'cell (rounds 0, 1)', one entry per cell."""
    rounds: dict[str, list[int]] = {}
    for cell, rnd in keys:
        rounds.setdefault(cell, []).append(rnd)
    return [f"{cell} (round{'s' if len(r) > 1 else ''} {', '.join(map(str, sorted(r)))})"
            for cell, r in rounds.items()]


def print_report(report: Report, console: Console = console) -> None:
    """The moved metrics as a table, then cells added or missing, then one summary line."""
    if report.moved:
        table = Table(title="metrics moved beyond tolerance", title_justify="left",
                      box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1),
                      header_style="bold")
        for col in ("cell", "round", "metric", "baseline", "now", "change %"):
            text = col in ("cell", "metric")
            table.add_column(col, justify="left" if text else "right", no_wrap=not text,
                             overflow="fold")
        for m in report.moved:
            pct = m.change_pct
            table.add_row(m.cell, str(m.round), m.metric, _num(m.baseline), _num(m.now),
                          "-" if math.isnan(pct) else f"{pct:+.4g}")
        show(console, table)
    for label, keys in (("added (no baseline)", report.added),
                        ("missing (in the baselines, not in the grid)", report.missing)):
        for entry in _by_cell(keys):
            console.print(f"{label}: {entry}", highlight=False, markup=False)
    line = f"{report.cells} cells, {report.compared} metrics, {len(report.moved)} moved"
    if report.added or report.missing:
        line += (f", {len(_by_cell(report.added))} cells added, "
                 f"{len(_by_cell(report.missing))} missing")
    console.print(line, highlight=False)


MOVED_COLUMNS = ("cell", "round", "metric", "baseline", "now", "change_pct")


@commands.command("regress")
def regress_cmd(
    baselines: Annotated[Path, typer.Option(
        help="Directory with grid.toml, tolerances.toml and metrics.csv (grid and "
             "tolerances default to the committed ones when absent)."
             + shown("results/baselines of the checkout"), show_default=False)] = DEFAULT_DIR,
    update_: Annotated[bool, typer.Option(
        "--update", help="Rewrite metrics.csv from this run (after an intended change).")]
    = False,
    jobs: Annotated[int, typer.Option(
        "--jobs", "-j", help="Cells at a time, in worker processes.")] = 1,
    json_out: Annotated[bool, typer.Option("--json", help="Print the moved metrics as JSON "
                                           "(the summary goes to stderr).")] = False,
    csv_out: Annotated[bool, typer.Option("--csv", help="Print the moved metrics as CSV "
                                          "(the summary goes to stderr).")] = False,
) -> None:
    """Recompute the regression grid and compare every per-round metric with the
    baselines; exit 1 when one moved beyond its tolerance or cells differ."""
    fmt = output_format(json_out, csv_out)
    if jobs < 1:
        fail("--jobs: must be a positive integer")
    if baselines.exists() and not baselines.is_dir():
        fail(f"--baselines: {baselines} is a file; it names a folder of baselines")
    if not baselines.is_dir() and not update_:  # a typo ran the grid and failed as a regression
        fail(f"--baselines: no folder {baselines} (--update makes one from this run)")
    if not update_ and not any((baselines / f).is_file() for f in ("metrics.csv", "grid.toml")):
        fail(f"--baselines: {baselines} holds no metrics.csv (--update writes it from this "
             "run)")  # an empty folder: 92 "added" lines, exit 1
    from harness.core.notes import keep_notes, say_all

    start = time.perf_counter()
    try:
        with keep_notes() as notes:  # the grid's calibration notes, the same every run
            report, rows = regress(baselines, jobs)
    except (ConfigError, UnknownName) as err:
        fail(str(err))
    if not report.ok:  # said where a change moved something: they may be why
        say_all(notes)
    seconds = time.perf_counter() - start
    if fmt != "table":  # the rows for a program on stdout, the words for a person on stderr
        moved = [{"cell": m.cell, "round": m.round, "metric": m.metric,
                  "baseline": m.baseline, "now": m.now, "change_pct": m.change_pct}
                 for m in report.moved]
        if moved or fmt == "json":
            machine(moved, fmt)
        else:  # nothing moved: the header alone, a table with no rows (it printed nothing)
            typer.echo(",".join(MOVED_COLUMNS))
    say = console if fmt == "table" else Console(stderr=True, width=200)
    print_report(report, say)
    if update_:
        update(baselines, rows)
        cells = len({r["cell"] for r in rows})
        say.print(f"wrote {baselines / 'metrics.csv'} ({cells} cells, {len(rows)} rows) "
                  f"in {seconds:.1f} s", highlight=False, markup=False)
        return
    say.print(f"{'ok' if report.ok else 'FAILED'} in {seconds:.1f} s"
              + ("" if report.ok else
                 f"; if intended: rolloutbench regress --update --baselines {baselines}"),
              highlight=False, markup=False)
    if not report.ok:
        raise typer.Exit(1)
