"""What kind of rolloutbench file a path holds, for errors that name it.

Why: a user who gives `timeline` the run's metrics.json instead of its
trace.jsonl should read "not a trace but a metrics file", not a JSON parser's
complaint about truncated input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

GENERIC = "a JSON document, not one event per line"
MAX_BYTES = 64 << 20  # a bigger JSON document is not read whole just to name it
TABLES = {".csv": "a results table (CSV)", ".parquet": "a results table (Parquet)",
          ".toml": "a TOML file (a config or a sweep spec)",
          ".png": "a figure", ".pdf": "a figure", ".svg": "a figure"}


def _json_kind(doc: Any) -> str:
    if isinstance(doc, list) and doc and all(isinstance(r, dict) and "round" in r
                                             for r in doc):
        return "a metrics file (a run's metrics.json)"
    if isinstance(doc, dict):
        if "traceEvents" in doc:
            return "a timeline (from `rolloutbench timeline`)"
        if "cell" in doc and "rounds" in doc:
            return "a sweep cell's result.json"
        if "commit" in doc and "version" in doc:
            return "a run's run.json"
    return GENERIC


def describe(path: str | Path) -> str | None:
    """'a metrics file (...)', 'a results table (CSV)', ...; None when unknown."""
    path = Path(path)
    if path.suffix.lower() in TABLES:
        return TABLES[path.suffix.lower()]
    try:
        if path.stat().st_size > MAX_BYTES:
            return None
        doc = msgspec.json.decode(path.read_bytes())
    except (OSError, msgspec.DecodeError):
        return None
    return _json_kind(doc)


def not_a_trace(path: str | Path, first_line_is_json: bool) -> str | None:
    """The one-line reason a file is not a trace, when its kind is known. A file
    whose first line is JSON (a bad event) is only named as a known kind."""
    kind = describe(path)
    if kind is None or (first_line_is_json and kind == GENERIC):
        return None
    return f"{path}: not a trace (JSON lines, as a run's trace.jsonl) but {kind}"
