"""`rolloutbench sweep`: run a grid of configurations from a TOML spec, in
parallel, resumably; the logic lives in harness.studies.sweep."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from harness.cli.common import (
    console,
    fail,
    kill_as_ctrl_c,
    refuse_overwrite,
    shown,
    stop_code,
    workload_file,
    wrap,
)
from harness.core.config import ConfigError
from harness.shared.ray_connect import HELP as RAY_HELP

if TYPE_CHECKING:
    from harness.studies.sweep import Sweep

commands = typer.Typer()  # added to the app in harness/cli/app.py


HELP = ("Run every cell of a sweep spec not done yet in OUT; write one table of all cells' "
        "per-round metrics. Rerun the same command to resume after Ctrl-C.\n\n"
        f"--ray-address: {RAY_HELP}")  # here, not in the option's column: it would not fit


@commands.command("sweep", help=HELP)
def sweep_cmd(
    spec: Annotated[Path, typer.Argument(
        help="Sweep spec (TOML): tables base, grid and zip, and repeats = N.")],
    out: Annotated[Path, typer.Option(help="Directory for cells/, results.parquet and "
                                      "results.csv.")],
    jobs: Annotated[int | None, typer.Option(
        "--jobs", "-j", help="Cells at a time." + shown("the CPU count"))] = None,
    ray_address: Annotated[str | None, typer.Option(
        help="Run cells as Ray tasks on this cluster ('local': start a private Ray)."
             + shown("none: local processes"))]
    = None,
    retry_failed: Annotated[bool, typer.Option(
        help="Run again the cells recorded as failed.")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Write this spec's table into an OUT that holds another sweep's "
                        "cells (they stay in OUT/cells, out of the table).")] = False,
) -> None:
    """Run every cell of a sweep spec not done yet in OUT (the command's help is HELP: it
    says how long an address given to --ray-address is waited for)."""
    from harness.studies.sweep import (
        check_footprints,
        foreign_cells,
        ignored_by_cells,
        load_spec,
        pending,
        read_result,
    )

    if jobs is not None and jobs < 1:
        fail("--jobs: must be a positive integer")
    try:
        sweep = load_spec(spec)
    except ConfigError as err:
        fail(f"{spec}: {err}")
    if ray_address:  # before the first line of progress: an address must answer
        from harness.shared.ray_connect import check_address

        check_address(ray_address)
    from harness.run.out_folder import check_out

    check_out(out)  # a file, or unmakeable: one line before any cell runs
    reads = sorted({f for cell in sweep.cells if (f := workload_file(cell.config.workload))})
    refuse_overwrite("--out", out, [("SPEC", spec), *(("a cell's --workload", r) for r in reads)],
                     ("cells/", "results.parquet", "results.csv"))
    others = foreign_cells(sweep, out)
    if others and not force:  # cells SPEC lacks: its results table would leave them out
        fail(f"--out {out}: holds {others} cells of another sweep (or --force)")
    ignored = ignored_by_cells(sweep)
    if ignored:  # one line: which systems ignore which option
        typer.echo(f"note: {ignored}", err=True)
    cells = pending(sweep, out, retry_failed)
    try:  # memory and trace size, before anything runs or is written
        check_footprints(cells, out, jobs or os.cpu_count() or 1, ray_address)
    except ConfigError as err:
        fail(str(err))
    todo = len(cells)
    skipped = len(sweep.cells) - todo
    console.print(f"{len(sweep.cells)} cells, {skipped} done already, {todo} to run",
                  highlight=False)
    _run(sweep, out, jobs or os.cpu_count() or 1, ray_address, retry_failed, todo)
    results = [(cell, read_result(out, cell)) for cell in sweep.cells]
    errors = [(cell, r["error"]) for cell, r in results if r and r.get("error")]
    for cell, error in errors[:5]:
        typer.echo(f"failed {cell.key} {cell.varied} seed={cell.config.seed}: {error}",
                   err=True)
    console.print(f"wrote {out / 'results.parquet'} and {out / 'results.csv'} "
                  f"({len(sweep.cells) - len(errors)} ok, {len(errors)} failed)",
                  highlight=False)
    if errors:
        raise typer.Exit(1)


def _run(sweep: Sweep, out: Path, jobs: int, ray_address: str | None, retry_failed: bool,
         todo: int) -> None:
    """The pending cells, with a bar on stderr (piped: a line now and then, with how
    many failed: a sweep of minutes was silent after its first line)."""
    from harness.core.progress import Bar
    from harness.studies.sweep import run_sweep

    done, failed = [0], [0]
    kill_as_ctrl_c()
    try:
        with Bar("sweep: cells", todo) as bar:

            def on_done(_cell: Any, result: dict[str, Any]) -> None:
                done[0] += 1
                failed[0] += bool(result.get("error"))
                bar.update(done[0], note=f"{failed[0]} failed" if failed[0] else "")

            run_sweep(sweep, out, jobs, ray_address, on_done, retry_failed)
    except KeyboardInterrupt:  # the tables are written of what finished: said so
        finished = len(sweep.cells) - todo + done[0]
        code, word = stop_code()
        typer.echo(wrap(f"{word}: {out}/results.parquet and .csv hold the {finished} of "
                        f"{len(sweep.cells)} cells that finished; rerun to resume"), err=True)
        raise typer.Exit(code) from None
    except ConfigError as err:
        fail(str(err))
