"""Reading result sets: tables of metric rows in CSV, Parquet or JSON.

Why one reader: `compare` and `plot` accept the same files (`rolloutbench run`'s
metrics.json, `metrics --json`, a sweep's results.parquet/csv, the reproduction
CSVs under results/), and a bad file should fail the same way in both: one line
naming the file, never a pandas traceback.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from harness.analysis import InputError

TABLE_SUFFIXES = (".csv", ".parquet", ".pq", ".json")


def read_table(path: str | os.PathLike[str]) -> Any:
    """A pandas DataFrame from a CSV, Parquet or JSON (a list of row objects) file."""
    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a CSV, Parquet or JSON file")
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            frame = pd.read_csv(path)
        elif suffix in (".parquet", ".pq"):
            frame = pd.read_parquet(path)
        elif suffix == ".json":
            rows = json.loads(path.read_text())
            if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
                raise InputError(f"{path}: expected a JSON list of row objects")
            frame = pd.DataFrame(rows)
        else:
            raise InputError(f"{path}: unknown file type {suffix or '(none)'!r} "
                             f"(expected one of {', '.join(TABLE_SUFFIXES)})")
    except InputError:
        raise
    except (OSError, ValueError, ImportError) as err:  # pandas/pyarrow parse errors
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"{path}: cannot read ({first})") from None
    if frame.empty:
        raise InputError(f"{path}: no rows")
    return frame


def require_columns(frame: Any, path: str | os.PathLike[str],
                    wanted: dict[str, str | None]) -> None:
    """Raise InputError naming the option and column when a wanted column is missing,
    with the columns there are. `wanted` maps option name -> column (None: unused)."""
    for option, column in wanted.items():
        if column is not None and column not in frame.columns:
            raise InputError(f"{option}: no column {column!r} in {path} "
                             f"(columns: {', '.join(map(str, frame.columns))})")
