"""The simulator's trace writer: events kept as columns, written once at the end.

A simulated run emits an event every few microseconds of wall time, and nothing
reads its trace while it runs (a live run's trace is written line by line: it
can die at any moment, `TraceWriter`). So `record` only appends: the time to one
array, the event's schema (its kind and field names, in order) to another, and
the field values to that schema's own flat list. No dict, line or bytes object
is kept per event: a million-request run (about 3.1M events) keeps its values
and 9 bytes an event of order, not 3.1M encoded lines.

The lines are made once, at `close` (and by `events`, for the kinds a reader
asks for): each schema gets a msgspec Struct whose fields are `t`, `ev` and its
fields in order, so encoding one gives the bytes `TraceWriter` writes for the
same event (`t` rounded to 6 decimals, msgspec's encoding, no spaces;
`tests/test_sim_speed.py` checks it). A path ending in .zst is written through
zstd (`harness.core.trace_io`); any other name, as plain lines.

Why close writes whatever was recorded: a run stopped by Ctrl-C or a fault ends
with `run_end` (the runner emits it) and then `close`, so its trace is whole and
readable either way.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Collection, Iterator
from itertools import repeat
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import zstandard

from harness.core.trace import TraceWriter
from harness.core.trace_io import LEVEL, compressed_name

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


def _line_type(kind: str, names: tuple[str, ...]) -> Callable[..., Any] | None:
    """A Struct that encodes as `{"t":..,"ev":..,<names>}`; None when a field is
    itself named t or ev (it overrides the time or kind: built as a dict instead)."""
    if "t" in names or "ev" in names:
        return None
    fields = [("t", Any), ("ev", Any), *((name, Any) for name in names)]
    return msgspec.defstruct(f"Event_{kind}", fields)


class BufferedTraceWriter(TraceWriter):
    CHUNK = 1 << 16  # events encoded (and written) at a time at close

    def __init__(self, path: str | os.PathLike[str], clock: Callable[[], float],
                 write: bool = True) -> None:
        """`write=False` keeps the events in memory only (`events`): no file is opened
        or left (a reproduction's runs, whose readers take the events from memory).
        Otherwise the file is made (emptied) now, so a bad path fails before the run."""
        self.path, self._clock = Path(path), clock
        self._file: BinaryIO | None = open(self.path, "wb") if write else None  # type: ignore[assignment]
        self._times = array("d")  # each event's time, unrounded
        self._order = array("H")  # each event's schema id
        self._ids: dict[tuple[str, ...], int] = {}  # (kind, *names) -> schema id
        self._keys: list[tuple[str, ...]] = []  # schema id -> (kind, *names)
        self._values: list[list[Any]] = []  # schema id -> its events' values, flat
        self._types: list[Callable[..., Any] | None] = []  # schema id -> `_line_type`

    def record(self, ev: str, **fields: Any) -> None:
        """`emit` without handing the event back (what the simulator calls)."""
        key = (ev, *fields)
        sid = self._ids.get(key)
        if sid is None:
            sid = self._ids[key] = len(self._keys)
            self._keys.append(key)
            self._values.append([])
            self._types.append(_line_type(ev, key[1:]))
        self._times.append(self._clock())
        self._order.append(sid)
        self._values[sid] += fields.values()

    def emit(self, ev: str, **fields: Any) -> dict[str, Any]:
        """`record`, and the event as a reader decodes its line."""
        self.record(ev, **fields)
        return _decoder.decode(_encoder.encode({"t": round(self._times[-1], 6), "ev": ev,
                                                **fields}))

    def _lines(self, kinds: Collection[str] | None = None) -> Iterator[list[Any]]:
        """The events (of `kinds`, when given) as objects that encode to their lines,
        a chunk at a time, in the order they were recorded."""
        n, types = len(self._order), self._types
        rows: list[Iterator[tuple[Any, ...]]] = []
        for key, values in zip(self._keys, self._values, strict=True):
            width = len(key) - 1
            flat = iter(values)
            rows.append(zip(*[flat] * width, strict=False) if width else repeat(()))
        keep = [kinds is None or key[0] in kinds for key in self._keys]
        for a in range(0, n, self.CHUNK):
            b = min(a + self.CHUNK, n)
            chunk: list[Any] = []
            for t, sid in zip(self._times[a:b], self._order[a:b], strict=True):
                row = next(rows[sid])
                if not keep[sid]:
                    continue
                key, make = self._keys[sid], types[sid]
                if make is not None:
                    chunk.append(make(round(t, 6), key[0], *row))
                else:
                    fields = dict(zip(key[1:], row, strict=True))
                    chunk.append({"t": round(t, 6), "ev": key[0], **fields})
            yield chunk

    def events(self, kinds: Collection[str] | None = None) -> list[dict[str, Any]]:
        """The events as a reader would decode them from the file (the same JSON,
        decoded at once; no schema check: the writer is ours), only those of
        `kinds` when given (only those are encoded)."""
        out: list[dict[str, Any]] = []
        for chunk in self._lines(kinds):
            out += _decoder.decode(_encoder.encode(chunk))
        return out

    def close(self) -> None:
        """Write every event recorded so far, then close the file (once). An empty
        run leaves an empty file, as one that never started."""
        fh, self._file = self._file, None
        if fh is None:
            return
        with fh:
            if not self._order:
                return
            if compressed_name(self.path):
                with zstandard.ZstdCompressor(level=LEVEL).stream_writer(
                        fh, closefd=False) as out:
                    for chunk in self._lines():
                        out.write(_encoder.encode_lines(chunk))
            else:
                for chunk in self._lines():
                    fh.write(_encoder.encode_lines(chunk))
