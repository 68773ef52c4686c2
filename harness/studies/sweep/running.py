"""Running a sweep's cells: in local worker processes or as Ray tasks, each cell's result
recorded as it ends, the tables written at the end even on Ctrl-C."""

from __future__ import annotations

import signal
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from harness.core.config import RunConfig
from harness.core.files import provenance
from harness.core.metrics import ROUND_METRIC_EVENTS, round_metrics
from harness.core.notes import error_line, kept, say_all
from harness.core.workers import stop_workers
from harness.core.yardstick import EVENTS as DELIVERED_EVENTS
from harness.core.yardstick import delivered, with_delivered
from harness.run.execute import reads
from harness.sim.calibration import say_train_mfu
from harness.studies.sweep.results import pending, record, write_tables
from harness.studies.sweep.spec import Cell, Sweep


def check_footprints(cells: list[Cell], out: Path, jobs: int,
                     ray_address: str | None = None) -> None:
    """The cells about to run, checked alone as `run` checks one, then `jobs` at once
    (harness.run.footprint; a Ray cluster's memory, not 'local', is unknown); MFU said once."""
    from harness.run.footprint import check_cells as check

    for cell in cells:
        say_train_mfu(cell.config.sim)
    check([("cell " + ", ".join(f"{k}={v!r}" for k, v in c.varied.items()) if c.varied
            else "base", c.config) for c in cells], out, jobs,
          memory=not ray_address or ray_address == "local")


@reads(*ROUND_METRIC_EVENTS, *DELIVERED_EVENTS)
def rows_delivered(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A cell's round rows, each with its run's delivered figures (the trained tokens a
    second systems are ranked by, over the steady window), as `run` writes metrics.json:
    a sweep's table ranks cells by the same yardstick."""
    return with_delivered(round_metrics(events), delivered(events))


def run_cell(cfg: RunConfig, folder: str | None) -> dict[str, Any]:
    """Run one cell in a worker: its metrics, or its error as one line; its trace into
    `folder`, or with none (a Ray node may not share our disk) returned, (name, bytes)."""
    from harness.core.trace_io import trace_name
    from harness.run.execute import execute

    start, trace, error, name = time.perf_counter(), None, None, trace_name(cfg.runtime)
    try:
        cfg.validate()
        if folder is not None:
            Path(folder).mkdir(parents=True, exist_ok=True)
            rows = execute(cfg, Path(folder, name), rows_delivered)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                rows = execute(cfg, Path(tmp, name), rows_delivered)
                trace = (name, Path(tmp, name).read_bytes())
    except Exception as err:  # noqa: BLE001  (recorded; the sweep goes on)
        rows, error = [], error_line(err)
    return {"rounds": rows, "error": error, "trace": trace, "seconds": time.perf_counter() - start}


Done = Callable[[Cell, dict[str, Any]], None]


def _ignore_sigint() -> None:
    """Workers leave Ctrl-C to the parent, which stops the pool in one place."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_local(cells: list[Cell], out: Path, jobs: int, done: Done) -> None:
    pool = ProcessPoolExecutor(max_workers=jobs, initializer=_ignore_sigint)
    try:
        futures = {pool.submit(kept, run_cell, c.config,  # the notes said once, in done
                               str(out / "cells" / c.key)): c for c in cells}
        for fut in as_completed(futures):
            try:
                result = fut.result()
            except Exception as err:  # noqa: BLE001  (a worker died: BrokenProcessPool)
                result = {"rounds": [], "error": error_line(err)}
            done(futures[fut], result)
    except BaseException:  # Ctrl-C: drop queued cells, stop running ones, keep the rest
        stop_workers(pool)  # gone before their cells' folders are
        _drop_unfinished(cells, out)
        raise
    pool.shutdown()


def _drop_unfinished(cells: list[Cell], out: Path) -> None:
    """The folders of cells stopped before their result was recorded: a trace there
    (whole or cut) is of no cell of the table, and `metrics OUT/cells/*/trace*` would
    count it; the rerun simulates them again."""
    import shutil

    for cell in cells:
        folder = out / "cells" / cell.key
        if folder.is_dir() and not (folder / "result.json").exists():
            shutil.rmtree(folder, ignore_errors=True)


def run_ray(cells: list[Cell], done: Done) -> None:
    """Ray tasks on the Ray `run_sweep` joined: the nodes run this checkout's code."""
    import ray

    task = ray.remote(num_cpus=1)(kept)
    refs = {task.remote(run_cell, c.config, None): c for c in cells}
    waiting = list(refs)
    try:
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1)
            try:
                result = ray.get(ready[0])
            except Exception as err:  # noqa: BLE001  (a task or node died)
                result = {"rounds": [], "error": error_line(err)}
            done(refs[ready[0]], result)
    except BaseException:
        for ref in waiting:
            ray.cancel(ref, force=True)
        raise


def run_sweep(sweep: Sweep, out: Path, jobs: int, ray_address: str | None = None,
              on_done: Done | None = None, retry_failed: bool = False) -> list[Cell]:
    """Run the cells not done yet; results are written as each cell ends and the
    tables are rewritten at the end even on Ctrl-C. Returns the cells that ran.
    With `ray_address`, Ray is joined first: one that fails leaves OUT as it was."""
    from harness.shared.ray_connect import connect

    todo = pending(sweep, out, retry_failed)
    check_footprints(todo, out, jobs, ray_address)  # before any cell runs
    on_ray = bool(todo and ray_address)
    started = on_ray and connect(str(ray_address), num_cpus=jobs)  # fails in one line
    prov = provenance()
    ran: list[Cell] = []

    def done(cell: Cell, result: dict[str, Any]) -> None:
        say_all(result.pop("notes", ()))  # a worker's, each once a sweep
        record(out, cell, result, prov)
        ran.append(cell)
        if on_done is not None:
            on_done(cell, result)

    try:
        if on_ray:
            run_ray(todo, done)
        elif todo:
            run_local(todo, out, jobs, done)
    finally:
        try:
            write_tables(sweep, out)
        finally:
            if started:
                import ray

                ray.shutdown()
    return ran
