"""A sweep's results on disk: each cell's result.json (written last, so that its presence
means the cell is done), and the one table of every cell's rounds (results.csv,
results.parquet)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

from harness.core.files import discard, write_atomic
from harness.core.metrics import KEYS, OFFPOLICY_KEYS
from harness.core.yardstick import KEYS as DELIVERED_KEYS
from harness.core.yardstick import WINDOW_KEYS
from harness.studies.sweep.spec import Cell, Sweep, _flatten


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


def table_rows(sweep: Sweep, out: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per cell and round (one row with `error` for a failed cell), and the
    column order: config columns, round, metrics, error."""
    fixed = [k for k in ("system", "workload", "seed") if k not in sweep.columns]
    config_cols = ["cell", *sweep.columns, *fixed]
    rows: list[dict[str, Any]] = []
    # a stable schema, even if all fail: the yardstick's figures first, then the rounds'
    metric_cols = dict.fromkeys([*DELIVERED_KEYS, *WINDOW_KEYS, "no_window", *KEYS,
                                 *OFFPOLICY_KEYS])
    for cell in sweep.cells:
        res = read_result(out, cell)
        if res is None:
            continue
        # a field the run's header leaves out while at its default (`RunConfig.to_dict`:
        # speculative decoding off, another system's table) is read from the cell's own
        flat = {**_flatten(dataclasses.asdict(cell.config)), **_flatten(res["config"])}
        # a varied knob the cell's system does not read: no value (`make_cell`)
        head = {"cell": cell.key, **{k: None if k in cell.varied and cell.varied[k] is None
                                     else flat.get(k) for k in config_cols[1:]}}
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
        discard(tmp)
    return len(frame)
