"""Reading other projects' files strictly: JSON lines and typed fields, each failure
one `SourceError` naming the file, line and field.

Why strict: these files come from other machines and other versions of their
writers. A field that is missing or of another type means the file is not what
the reader was written for, and a trace built from a guess would mislead every
figure made from it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from harness.imports.sample import SourceError

_decoder = msgspec.json.Decoder()


def jsonl(path: Path, nan: bool = False) -> Iterator[tuple[str, Any]]:
    """("FILE:LINE", value) for each non-blank line; a line that is not JSON, or the
    last line cut mid-write (no newline and not JSON), is a SourceError. `nan`: read with
    Python's json, which takes the NaN a pandas frame's `json.dumps` writes for a key a
    row lacks (strict JSON, msgspec's, refuses it)."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise SourceError(f"{path}: cannot read ({err.strerror})") from None
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        where = f"{path}:{number}"
        try:
            value = json.loads(raw) if nan else _decoder.decode(raw)
        except (msgspec.DecodeError, ValueError):
            if number == len(lines) and not data.endswith(b"\n"):
                raise SourceError(f"{where}: the last line is cut short (the writer was "
                                  f"stopped mid-line?)") from None
            raise SourceError(f"{where}: not a JSON value") from None
        yield where, value


_KINDS: dict[str, tuple[type, ...]] = {
    "an integer": (int,), "a number": (int, float), "a string": (str,), "a boolean": (bool,),
    "an object": (dict,), "a list": (list,),
}


def need(obj: Any, key: str, kind: str, where: str) -> Any:
    """obj[key], which must be of `kind` (a key of _KINDS)."""
    if not isinstance(obj, dict):
        raise SourceError(f"{where}: expected an object (a mapping), got "
                          f"{type(obj).__name__}")
    if key not in obj:
        raise SourceError(f"{where}: missing field {key!r}")
    return check(obj[key], key, kind, where)


def check(value: Any, key: str, kind: str, where: str) -> Any:
    """`value` (field `key`), which must be of `kind`; a bool is no number here."""
    ok = isinstance(value, _KINDS[kind])
    if kind != "a boolean" and isinstance(value, bool):
        ok = False
    if not ok:
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise SourceError(f"{where}: field {key!r} must be {kind}, got {shown}")
    return value


def files(sources: list[Path], pattern: str, what: str, inside: str | None = None
          ) -> list[Path]:
    """The files named, a folder standing for its files matching `pattern` (a glob from
    the run's folder), or `inside` (from a folder within it, as `rollout/` or
    `streams/actor/`), in name order; none found is a SourceError naming `what`."""
    out: list[Path] = []
    for src in sources:
        if src.is_dir():
            found = sorted(src.glob(pattern)) or (sorted(src.glob(inside)) if inside else [])
            if not found:
                raise SourceError(f"{src}: no {what} in this folder (looked for {pattern})")
            out += found
        elif src.exists():
            out.append(src)
        else:
            raise SourceError(f"{src}: no such file or folder")
    return out
