"""`rolloutbench whatif`: the what-if studies of docs/whatif/ (logic in harness.studies.whatif)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from harness.cli.common import console, fail, kill_as_ctrl_c, output_format, shown, stop_code, wrap
from harness.core.config import ConfigError

commands = typer.Typer()  # added to the app in harness/cli/app.py

MOST_ROWS_SHOWN = 40  # a study's summary printed as a table up to this many rows


@commands.command("whatif")
def whatif_cmd(
    name: Annotated[str, typer.Argument(
        help="A study (fgd-frontier, heavy-tails, april-oversampling, "
             "pipelinerl-concurrency, combos, staleness) or all.")] = "all",
    out: Annotated[Path, typer.Option(help="Directory; each study's sweep goes to OUT/NAME.")]
    = Path("runs/whatif"),
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Cells at a time.")] = 2,
    figures: Annotated[Path | None, typer.Option(
        help="Directory for whatif_NAME.png." + shown("OUT/NAME"))] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the studies' summaries as "
                                           "JSON, a `study` field in each row.")] = False,
    csv_out: Annotated[bool, typer.Option("--csv", help="Print the studies' summaries as CSV, "
                                          "a `study` column in each row.")] = False,
) -> None:
    """Run what-if sweeps on the simulator and draw their figures; prints each study's
    summary and wall time. Reruns resume the sweeps (finished cells are kept)."""
    from rich.console import Console

    from harness.cli.tables import machine, rows_table, show
    from harness.core.registry import UnknownName, unknown_name
    from harness.studies.whatif import run_study, study_names

    fmt = output_format(json_out, csv_out)
    say = console if fmt == "table" else Console(stderr=True, width=200)  # stdout: the rows
    every: list[dict[str, Any]] = []
    if jobs < 1:
        fail("--jobs: must be a positive integer")
    names = study_names() if name == "all" else [name]
    if name != "all" and name not in study_names():
        fail(str(unknown_name("what-if study", name, ["all", *study_names()])))
    from harness.run.out_folder import check_out

    for folder, option in ((out, "--out"), (figures, "--figures")):
        if folder is not None:
            check_out(folder, option)  # a file, or unmakeable: one line before any work
    from harness.core.progress import Bar
    from harness.studies.sweep import ignored_by_cells, pending
    from harness.studies.whatif import study_sweep

    kill_as_ctrl_c()
    for study in names:
        say.print(f"[bold]{study}[/bold]: running sweeps/whatif/{study}.toml", highlight=False)
        finished = [0, 0]  # cells finished, of how many (once the spec is read)
        try:
            spec = study_sweep(study)
            todo = len(pending(spec, out / study))  # those done before are kept, not run
            ignored = ignored_by_cells(spec)
            if ignored:  # as `sweep` says it: once, on stderr
                typer.echo(f"note: {ignored}", err=True)
            kept = len(spec.cells) - todo
            finished[:] = [kept, len(spec.cells)]
            label = f"{study} ({kept} of {len(spec.cells)} cells done before)" if kept else study
            with Bar(label, todo) as bar:  # stderr

                def tick(_cell: Any, result: dict[str, Any], bar: Bar = bar,
                         finished: list[int] = finished) -> None:
                    bar.advance()
                    finished[0] += 1
                    if result.get("error"):
                        typer.echo(f"  cell failed: {result['error']}", err=True)

                res = run_study(study, out, jobs, figures, on_done=tick)
        except (ConfigError, UnknownName) as err:
            fail(f"{study}: {err}")
        except KeyboardInterrupt:  # its sweep's tables hold what finished: said so
            code, word = stop_code()
            typer.echo(wrap(f"{word}: {study}: its results hold the {finished[0]} of "
                            f"{finished[1]} cells that finished; rerun to resume"), err=True)
            raise typer.Exit(code) from None
        rows = res.summary.to_dict("records")
        every += [{"study": study, **r} for r in rows]
        if fmt == "table" and 0 < len(rows) <= MOST_ROWS_SHOWN:
            show(console, rows_table(rows))
        elif fmt == "table" and rows:  # staleness' 222 rows ran to 4,770 lines of table
            say.print(wrap(f"{study}: {len(rows)} rows, too many to print here: "
                           f"{res.out / 'summary.csv'}" + (f" (tables: {res.out / 'summary.md'})"
                                                           if (res.out / "summary.md").exists()
                                                           else "")),
                      highlight=False, markup=False, soft_wrap=True)
        timing = (f"{res.ran} cells in {res.wall_s:.1f} s wall on {jobs} jobs" if res.ran
                  else "all cells were done already")
        say.print(wrap(f"{study}: {res.cells} cells ({timing}, {res.failed} failed); "
                       f"figure {res.figure}; summary {res.out / 'summary.csv'}"),
                  highlight=False, markup=False, soft_wrap=True)  # 100 columns, paths whole
        if res.failed:
            raise typer.Exit(1)
    if fmt != "table":
        machine(every, fmt)
