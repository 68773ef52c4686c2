"""Regression of scheduling metrics against committed baselines.

A small fixed grid (`grid.toml`: systems x workloads x sizes, a few rounds, one
seed) is recomputed on the deterministic simulator and every per-round metric
is compared with `metrics.csv` within per-metric tolerances (`tolerances.toml`).
The golden traces catch *any* byte change; this check says *which figure* moved
and by how much, so an intended change to a system can be reviewed as numbers
and then accepted with `--update`.

A value moved when |now - baseline| > abs + rel * |baseline| (NaN equals NaN).
Floats are written with repr(), which round-trips exactly, so a rerun on the
same platform compares equal bit for bit; the tolerances only absorb libm and
summation-order noise across platforms.
"""

from __future__ import annotations

import copy
import csv
import io
import math
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.config import ConfigError, RunConfig
from harness.core.config_io import apply
from harness.core.files import read_toml, write_atomic
from harness.core.metrics import KEYS, OFFPOLICY_KEYS

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "results" / "baselines"
METRICS = (*KEYS, *OFFPOLICY_KEYS)
ID_COLUMNS = ("cell", "round", "system", "workload", "size", "groups")
GRID_KEYS = ("systems", "workloads", "base", "sizes", "per_system")
Row = dict[str, Any]
RowKey = tuple[str, int]  # (cell, round)


@dataclass
class Cell:
    """One grid point: `key` is system/workload/size, stable across config edits."""

    key: str
    system: str
    workload: str
    size: str
    config: RunConfig


@dataclass
class Moved:
    cell: str
    round: int
    metric: str
    baseline: float
    now: float

    @property
    def change_pct(self) -> float:
        """Relative change in percent; NaN when the baseline is 0 or either is NaN."""
        if self.baseline == 0 or math.isnan(self.baseline) or math.isnan(self.now):
            return math.nan
        return 100.0 * (self.now - self.baseline) / abs(self.baseline)


@dataclass
class Report:
    cells: int
    compared: int  # metric values compared
    moved: list[Moved]
    added: list[RowKey]  # rows computed now that the baselines lack
    missing: list[RowKey]  # rows in the baselines the grid no longer makes

    @property
    def ok(self) -> bool:
        return not (self.moved or self.added or self.missing)


def spec_file(directory: Path, name: str) -> Path:
    """DIR/name, or the committed one: a fresh `--update` directory needs no copy first."""
    own = directory / name
    return own if own.exists() else DEFAULT_DIR / name


def load_grid(path: Path) -> list[Cell]:
    """Expand grid.toml into cells; every config is validated before anything runs.
    A grid of one's own (--baselines DIR) is named in its errors: an unknown system
    there said only which system."""
    from harness.core.registry import UnknownName

    spec = read_toml(path)
    try:
        return _cells(spec, path)
    except (ConfigError, UnknownName) as err:
        if str(err).startswith(str(path)):
            raise
        raise ConfigError(f"{path}: {err}") from None


def _cells(spec: dict[str, Any], path: Path) -> list[Cell]:
    from systems import checked_names, get_system
    from workloads.profile import load_profile

    for key in spec:
        if key not in GRID_KEYS:
            raise ConfigError(f"{path}: {key}: unknown key (known: {', '.join(GRID_KEYS)})")
    systems = spec.get("systems", "all")
    # "all": the project's own systems and the plugins opted in (systems.checked_names)
    systems = checked_names() if systems == "all" else list(systems)
    per_system = spec.get("per_system", {})
    cells: list[Cell] = []
    for system in systems:
        get_system(system)  # UnknownName lists the known systems
        extra = dict(per_system.get(system, {}))
        steps = extra.pop("steps_per_round", None)  # U = R / steps, whatever the size
        for workload in spec.get("workloads", []):
            load_profile(workload)
            for size, fields in spec.get("sizes", {}).items():
                cfg = RunConfig(system=system, workload=workload)
                apply(cfg, copy.deepcopy(spec.get("base", {})), "base.")
                apply(cfg, dict(fields), f"sizes.{size}.")
                apply(cfg, copy.deepcopy(extra), f"per_system.{system}.")
                if steps is not None:
                    if not isinstance(steps, int) or steps < 1 or cfg.groups % steps:
                        raise ConfigError(f"per_system.{system}.steps_per_round: must be a "
                                          f"positive divisor of groups={cfg.groups}")
                    cfg.update_groups = cfg.groups // steps
                cells.append(Cell(f"{system}/{workload}/{size}", system, workload, size,
                                  cfg.validate()))
    if not cells:
        raise ConfigError(f"{path}: the grid is empty (systems, workloads, [sizes.*])")
    return cells


def run_cell(cell: Cell) -> list[Row]:
    """One cell's per-round rows; the trace is scratch: a simulated run keeps it in
    memory only, a live one writes it into a temp dir. Top-level so that worker
    processes can unpickle it."""
    from harness.run.execute import execute

    with tempfile.TemporaryDirectory(prefix="regress-") as tmp:
        rows = execute(copy.deepcopy(cell.config), Path(tmp) / "trace.jsonl",
                       write=cell.config.runtime != "sim")
    return [{"cell": cell.key, "round": int(r["round"]), "system": cell.system,
             "workload": cell.workload, "size": cell.size, "groups": cell.config.groups,
             **{k: float(r[k]) for k in METRICS}} for r in rows]


def run_kept(cell: Cell) -> tuple[list[Row], list[str]]:
    """`run_cell` in a worker, with the notes its run says kept for the parent to say
    (each worker would say them once: a grid on N workers N times)."""
    from harness.core.notes import keep_notes

    with keep_notes() as notes:
        rows = run_cell(cell)
    return rows, notes


def run_grid(cells: list[Cell], jobs: int = 1) -> list[Row]:
    """All cells' rows in grid order. Cells take tens of milliseconds, so one job
    is often fastest: a worker pool pays process start-up and imports first."""
    from harness.core.notes import say_once

    if jobs <= 1 or len(cells) <= 1:
        results = [run_cell(c) for c in cells]
    else:
        with ProcessPoolExecutor(max_workers=min(jobs, len(cells))) as pool:
            kept = list(pool.map(run_kept, cells))
        for note in (n for _, notes in kept for n in notes):
            say_once(note)
        results = [rows for rows, _ in kept]
    return [row for rows in results for row in rows]


def _fmt(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def to_csv(rows: list[Row]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([*ID_COLUMNS, *METRICS])
    for row in rows:
        writer.writerow([_fmt(row[c]) for c in (*ID_COLUMNS, *METRICS)])
    return buf.getvalue()


def read_csv(path: Path) -> list[Row]:
    """Baseline rows; metric columns are whatever the file has (an old file may
    lack a metric added since: it is compared from the next --update on)."""
    try:
        text = path.read_text()
    except OSError as err:
        raise ConfigError(f"{path}: {err.strerror} (create it with --update)") from None
    rows = []
    for rec in csv.DictReader(io.StringIO(text)):
        row: Row = {k: rec[k] for k in ID_COLUMNS}
        row["round"] = int(rec["round"])
        row.update({k: float(v) for k, v in rec.items() if k not in ID_COLUMNS})
        rows.append(row)
    return rows


def load_tolerances(path: Path) -> dict[str, tuple[float, float]]:
    """Metric -> (rel, abs): [default] for every metric, [metrics.NAME] overrides.
    Unknown metric names are errors, so a typo cannot loosen nothing silently."""
    data = read_toml(path)
    default = data.get("default", {})
    out = {m: (float(default.get("rel", 0.0)), float(default.get("abs", 0.0)))
           for m in METRICS}
    for name, tol in data.get("metrics", {}).items():
        if name not in METRICS:
            raise ConfigError(f"{path}: metrics.{name}: unknown metric "
                              f"(known: {', '.join(METRICS)})")
        out[name] = (float(tol.get("rel", out[name][0])), float(tol.get("abs", out[name][1])))
    return out


def within(baseline: float, now: float, rel: float, abs_: float) -> bool:
    if math.isnan(baseline) or math.isnan(now):
        return math.isnan(baseline) and math.isnan(now)
    return abs(now - baseline) <= abs_ + rel * abs(baseline)


def compare(baseline: list[Row], now: list[Row],
            tolerances: dict[str, tuple[float, float]]) -> Report:
    """Every metric of every (cell, round) both sides have, plus rows on one side only."""
    old = {(r["cell"], r["round"]): r for r in baseline}
    new = {(r["cell"], r["round"]): r for r in now}
    moved, compared = [], 0
    for key, row in new.items():
        if key not in old:
            continue
        for metric in METRICS:
            if metric not in old[key]:
                continue
            compared += 1
            rel, abs_ = tolerances[metric]
            if not within(old[key][metric], row[metric], rel, abs_):
                moved.append(Moved(key[0], key[1], metric, old[key][metric], row[metric]))
    cells = len({r["cell"] for r in now} | {r["cell"] for r in baseline})
    return Report(cells, compared, moved, [k for k in new if k not in old],
                  [k for k in old if k not in new])


def regress(directory: Path = DEFAULT_DIR, jobs: int = 1) -> tuple[Report, list[Row]]:
    """Recompute DIR's grid and compare with DIR/metrics.csv (no baseline: all added)."""
    cells = load_grid(spec_file(directory, "grid.toml"))
    tolerances = load_tolerances(spec_file(directory, "tolerances.toml"))
    now = run_grid(cells, jobs)
    csv_path = directory / "metrics.csv"
    baseline = read_csv(csv_path) if csv_path.exists() else []
    return compare(baseline, now, tolerances), now


def update(directory: Path, rows: list[Row]) -> None:
    """Write DIR/metrics.csv atomically; copy the grid and tolerances into DIR when it
    has none, so the directory is a complete, self-describing baseline."""
    for name in ("grid.toml", "tolerances.toml"):
        if not (directory / name).exists():
            write_atomic(directory / name, (DEFAULT_DIR / name).read_text())
    write_atomic(directory / "metrics.csv", to_csv(rows))
