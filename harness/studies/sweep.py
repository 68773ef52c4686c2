"""Parameter sweeps: a TOML spec expands to cells (one resolved RunConfig each),
run in parallel on local processes or a Ray cluster, resumable, and gathered
into one table (DIR/results.parquet and DIR/results.csv).

A cell's directory is named by a hash of its resolved config, so rerunning a
spec (or a widened one) finds the cells already done and runs only the rest.
Spec mistakes (unknown keys, wrong types, any cell `run` would refuse: a system typo, an
unknown preset, U not dividing R, too large for memory or disk) stop the sweep before anything
runs; a cell that fails while running is recorded with its error and the sweep goes on.
`repeats = N` runs seeds 0..N-1 (overriding base.seed); without it the base seed.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import itertools
import json
import math
import os
import signal
import tempfile
import time
import tomllib
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.config import ConfigError, RunConfig
from harness.core.config_io import apply
from harness.core.files import provenance, write_atomic
from harness.core.metrics import KEYS, OFFPOLICY_KEYS
from harness.core.notes import error_line, kept, say_all
from harness.sim.calibration import say_train_mfu

SPEC_KEYS = ("base", "grid", "zip", "repeats")
RANGE_KEYS = {"start", "stop", "step"}


@dataclass
class Cell:
    """One point: its key (the directory name), varied values by dotted name, config."""

    key: str
    varied: dict[str, Any]
    config: RunConfig


@dataclass
class Sweep:
    cells: list[Cell]
    columns: list[str]  # the varied (grid and zip) keys, in spec order


def _nest(key: str, value: Any) -> dict[str, Any]:
    """'sim.rollout_tp', 2 -> {'sim': {'rollout_tp': 2}}: the shape `apply` takes."""
    *parents, leaf = key.split(".")
    tree: dict[str, Any] = {leaf: value}
    for parent in reversed(parents):
        tree = {parent: tree}
    return tree


def _is_range(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and set(value) <= RANGE_KEYS


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested tables ([grid.sim]) to dotted keys; a range table is a value, not a table."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict) and not _is_range(value):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _values(where: str, value: Any) -> list[Any]:
    """A list of values, or {start, stop, step} expanded like Python's range."""
    if isinstance(value, list):
        if not value:
            raise ConfigError(f"{where}: empty list of values")
        return value
    if not _is_range(value):
        raise ConfigError(f"{where}: expected a list of values or {{start=, stop=, step=}}, "
                          f"got {value!r}")
    bounds = {"start": 0, "step": 1, **value}
    for name in ("stop", "start", "step"):
        v = bounds.get(name)
        if isinstance(v, bool) or not isinstance(v, int | float) or (name == "step" and v == 0):
            raise ConfigError(f"{where}.{name}: expected a number (step: not 0), got {v!r}")
    start, stop, step = bounds["start"], bounds["stop"], bounds["step"]
    if all(isinstance(v, int) for v in (start, stop, step)):
        out: list[Any] = list(range(start, stop, step))
    else:  # count first, then multiply: no drift from repeated float addition
        n = max(0, math.ceil((stop - start) / step - 1e-9))
        out = [round(start + i * step, 12) for i in range(n)]
    if not out:
        raise ConfigError(f"{where}: empty range {value!r}")
    return out


def parse_spec(spec: dict[str, Any]) -> Sweep:
    """Expand a spec (a TOML table) into cells; raises ConfigError naming the bad key."""
    for key in spec:
        if key not in SPEC_KEYS:
            raise ConfigError(f"{key}: unknown spec key (known: {', '.join(SPEC_KEYS)})")
        if key != "repeats" and not isinstance(spec[key], dict):
            raise ConfigError(f"{key}: expected a table")
    base = spec.get("base", {})
    for key in set(SPEC_KEYS) & set(base):  # TOML puts keys written after [base] inside it
        raise ConfigError(f"base.{key}: not a run field; write top-level keys such as "
                          "repeats before the first [table]")
    template = RunConfig()
    apply(template, base, "base.")
    grid = {k: _values(f"grid.{k}", v) for k, v in _flatten(spec.get("grid", {})).items()}
    zipped = {k: _values(f"zip.{k}", v) for k, v in _flatten(spec.get("zip", {})).items()}
    for key in grid.keys() & zipped.keys():
        raise ConfigError(f"zip.{key}: also in [grid]; vary a field in one place")
    for section, table in (("grid.", grid), ("zip.", zipped)):
        for key, values in table.items():  # type-check each value once, naming its key
            for value in values:
                apply(copy.deepcopy(template), _nest(key, value), section)
    if len({len(v) for v in zipped.values()}) > 1:
        sizes = ", ".join(f"{k}={len(v)}" for k, v in zipped.items())
        raise ConfigError(f"zip: lists must have equal lengths ({sizes})")
    repeats = spec.get("repeats")
    if repeats is not None:
        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
            raise ConfigError(f"repeats: expected a positive integer, got {repeats!r}")
        if "seed" in grid or "seed" in zipped:
            raise ConfigError("repeats: sets the seeds; do not also vary seed")
    seeds: list[int | None] = list(range(repeats)) if repeats is not None else [None]
    rows = zip(*zipped.values(), strict=True)
    zip_rows = [dict(zip(zipped, row, strict=True)) for row in rows] or [{}]
    cells: dict[str, Cell] = {}
    for combo in itertools.product(*grid.values()):
        for zrow in zip_rows:
            varied = {**dict(zip(grid, combo, strict=True)), **zrow}
            for seed in seeds:
                cell = make_cell(template, varied, seed)
                cells.setdefault(cell.key, cell)  # a duplicate point runs once
    sweep = Sweep(list(cells.values()), [*grid, *zipped])
    check_cells(sweep, template)
    return sweep


def _problem(cfg: RunConfig) -> str | None:
    """What `run` would refuse in this config, or None."""
    from harness.core.registry import UnknownName
    from harness.run.checks import check_run

    try:
        check_run(copy.deepcopy(cfg))
    except (ConfigError, UnknownName) as err:
        return str(err)
    return None


def check_cells(sweep: Sweep, base: RunConfig) -> None:
    """Every cell checked as `run` checks its options (system, workload, presets,
    calibration, U divides R, ...) before any runs; the first bad one is a
    ConfigError naming its varied values, or `base` when the base alone is bad."""
    for cell in sweep.cells:
        problem = _problem(cell.config)
        if problem is None:
            continue
        if not cell.varied or _problem(base) == problem:
            raise ConfigError(f"base: {problem}")
        values = ", ".join(f"{k}={v!r}" for k, v in cell.varied.items())
        raise ConfigError(f"cell {values}: {problem}")


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


def make_cell(template: RunConfig, varied: dict[str, Any], seed: int | None) -> Cell:
    """The point's config, keyed by its resolved form. Types were checked in parse_spec
    and values are checked by `check_cells`, before any cell runs."""
    from harness.shared.defaults import resolve_defaults

    cfg = copy.deepcopy(template)
    for key, value in varied.items():
        apply(cfg, _nest(key, value))
    if seed is not None:  # from repeats; else the base's (or a varied) seed
        cfg.seed = seed
    with contextlib.suppress(Exception):  # an unknown workload fails later, in its cell
        resolve_defaults(cfg)
    canon = json.dumps(cfg.to_dict(), sort_keys=True, separators=(",", ":"))
    return Cell(hashlib.sha256(canon.encode()).hexdigest()[:12], dict(varied), cfg)


def load_spec(path: str | os.PathLike[str]) -> Sweep:
    """Read and expand a spec file; errors do not repeat the path (the caller adds it)."""
    try:
        with open(path, "rb") as fh:
            return parse_spec(tomllib.load(fh))
    except OSError as err:
        raise ConfigError(str(err.strerror)) from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"not valid TOML: {err}") from None


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
            rows = execute(cfg, Path(folder, name))
        else:
            with tempfile.TemporaryDirectory() as tmp:
                rows = execute(cfg, Path(tmp, name))
                trace = (name, Path(tmp, name).read_bytes())
    except Exception as err:  # noqa: BLE001  (recorded; the sweep goes on)
        rows, error = [], error_line(err)
    return {"rounds": rows, "error": error, "trace": trace, "seconds": time.perf_counter() - start}


def record(out: Path, cell: Cell, result: dict[str, Any], prov: dict[str, Any]) -> None:
    """Write the cell's result.json last, so its presence means the cell is complete."""
    cell_dir = out / "cells" / cell.key
    if result.get("trace") is not None:
        write_atomic(cell_dir / result["trace"][0], result["trace"][1])
    body = {"cell": cell.key, "varied": cell.varied, "config": cell.config.to_dict(),
            "error": result["error"], "seconds": result.get("seconds"),
            "rounds": [{k: None if isinstance(v, float) and math.isnan(v) else v  # no NaN
                        for k, v in r.items()} for r in result["rounds"]],  # in JSON
            **prov}
    write_atomic(cell_dir / "result.json", json.dumps(body, indent=2) + "\n")


def read_result(out: Path, cell: Cell) -> dict[str, Any] | None:
    try:
        return json.loads((out / "cells" / cell.key / "result.json").read_text())
    except (OSError, ValueError):
        return None


def foreign_cells(sweep: Sweep, out: Path) -> int:
    """How many cells with a result in OUT this spec does not have: another sweep's,
    which this one's table would leave out (a widened spec has none)."""
    ours, folder = {c.key for c in sweep.cells}, out / "cells"
    return sum(1 for d in folder.iterdir() if d.name not in ours
               and (d / "result.json").is_file()) if folder.is_dir() else 0


def pending(sweep: Sweep, out: Path, retry_failed: bool = False) -> list[Cell]:
    """The cells with no result yet (and, if asked, those that failed)."""
    return [c for c in sweep.cells for r in [read_result(out, c)]
            if r is None or (retry_failed and r.get("error"))]


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
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in list((getattr(pool, "_processes", None) or {}).values()):
            proc.terminate()
        raise
    pool.shutdown()


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


def table_rows(sweep: Sweep, out: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per cell and round (one row with `error` for a failed cell), and the
    column order: config columns, round, metrics, error."""
    fixed = [k for k in ("system", "workload", "seed") if k not in sweep.columns]
    config_cols = ["cell", *sweep.columns, *fixed]
    rows: list[dict[str, Any]] = []
    metric_cols = dict.fromkeys([*KEYS, *OFFPOLICY_KEYS])  # a stable schema, even if all fail
    for cell in sweep.cells:
        res = read_result(out, cell)
        if res is None:
            continue
        # a field the run's header leaves out while at its default (`RunConfig.to_dict`:
        # speculative decoding off, another system's table) is read from the cell's own
        flat = {**_flatten(dataclasses.asdict(cell.config)), **_flatten(res["config"])}
        head = {"cell": cell.key, **{k: flat.get(k) for k in config_cols[1:]}}
        if res.get("error"):
            rows.append({**head, "error": res["error"]})
        for r in res.get("rounds") or []:
            metrics = {k: v for k, v in r.items() if k not in ("system", "workload", "round")}
            metric_cols.update(dict.fromkeys(metrics))
            rows.append({**head, "round": r["round"], **metrics})
    return rows, [*config_cols, "round", *metric_cols, "error"]


def write_tables(sweep: Sweep, out: Path) -> int:
    """results.parquet and results.csv, each written to a temporary name and renamed."""
    import pandas as pd

    rows, columns = table_rows(sweep, out)
    frame = pd.DataFrame(rows, columns=columns)
    frame["round"] = frame["round"].astype("Int64")
    frame["error"] = frame["error"].astype("string")
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "results.csv", frame.to_csv(index=False))
    tmp = out / f".results.parquet.{os.getpid()}.tmp"
    try:
        frame.to_parquet(tmp, index=False, engine="pyarrow")
        os.replace(tmp, out / "results.parquet")
    finally:
        tmp.unlink(missing_ok=True)
    return len(frame)
