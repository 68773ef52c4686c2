"""The simulator's trace writer: events kept as columns, packed, written once at the end.

A simulated run emits an event every few microseconds of wall time, and nothing
reads its trace while it runs (a live run's trace is written line by line: it
can die at any moment, `TraceWriter`). So `record` only appends: the event's
schema id (its kind and field names, in order) to the run-wide order, and its time
and field values to that schema's own flat list. No dict, line or bytes object is
made per event.

Why a schema's list is packed every few thousand events rather than kept whole:
Python objects cost far more than their text (a list of eight rewards is 300 bytes;
an int above 256, 28), so the columns of a million-request run (3.1M events) would
hold about 240 bytes an event, as much as the lines they replace. A full list is
turned at once into its JSON lines, compressed (zstd, in memory): about 11 bytes an
event, order included. Each event is still encoded once, in batches of one schema,
by C loops (msgspec, zstd) instead of a Python loop per event.

The lines: each schema gets a msgspec Struct whose fields are `t`, `ev` and its
fields in order, so encoding one gives the bytes `TraceWriter` writes for the same
event (`t` rounded to 6 decimals, msgspec's encoding, no spaces;
`tests/test_sim_speed.py` checks it). `close` interleaves the schemas' lines back
into the run's order and writes them, through zstd when the name ends in .zst
(`harness.core.trace_io`), as plain lines otherwise; `events` decodes those of the
kinds a reader asks for, and no others.

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
import numpy as np
import zstandard

from harness.core.trace import TraceWriter
from harness.core.trace_io import LEVEL, compressed_name

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


def round6(times: list[float]) -> list[float]:
    """`round(t, 6)` of each time, the same doubles as Python's round, five times faster:
    numpy's rint(t * 1e6) / 1e6 is that double (the quotient of the same integer k by
    1e6, correctly rounded) except where t * 1e6 lies so near a half that its own
    rounding error could tip k, or t is so large that the error grows; there Python's
    round is asked. A run rounds every event's time, and round() parses a decimal string
    each time (0.3 us)."""
    x = np.asarray(times, dtype=np.float64)
    scaled = x * 1e6
    k = np.rint(scaled)
    out = (k / 1e6).tolist()
    for i in np.flatnonzero((np.abs(np.abs(scaled - k) - 0.5) < 1e-3) | (x >= 1e6)).tolist():
        out[i] = round(times[i], 6)
    return out


def _line_type(kind: str, names: tuple[str, ...]) -> Callable[..., Any]:
    """What one event is made into to encode as its line, from (t, kind, *values): a
    Struct of fields t, ev, *names; a dict when a field is itself named t or ev (it
    overrides the time or kind, as in `TraceWriter`)."""
    if "t" in names or "ev" in names:
        return lambda t, ev, *values: {"t": t, "ev": ev, **dict(zip(names, values,
                                                                     strict=True))}
    fields = [("t", Any), ("ev", Any), *((name, Any) for name in names)]
    return msgspec.defstruct(f"Event_{kind}", fields)


class _Schema:
    """One kind with one list of field names: its events' times and values, flat
    (`values`), and the lines already packed (`packed`: zstd blocks of JSON lines)."""

    __slots__ = ("kind", "stride", "make", "values", "packed")

    def __init__(self, kind: str, names: tuple[str, ...]) -> None:
        self.kind, self.stride = kind, 1 + len(names)
        self.make = _line_type(kind, names)
        self.values: list[Any] = []
        self.packed: list[bytes] = []

    def pack(self, compress: Callable[[bytes], bytes]) -> None:
        """The values kept so far, made into their lines (compressed) and let go."""
        values, stride = self.values, self.stride
        if not values:
            return
        times = round6(values[0::stride])
        columns = [values[j::stride] for j in range(1, stride)]
        events = list(map(self.make, times, repeat(self.kind), *columns))
        self.packed.append(compress(_encoder.encode_lines(events)))
        values.clear()

    def lines(self, decompress: Callable[[bytes], bytes]) -> Iterator[list[bytes]]:
        """Its lines, in its order, a packed block at a time."""
        for block in self.packed:
            yield decompress(block).split(b"\n")[:-1]


class BufferedTraceWriter(TraceWriter):
    PACK = 1 << 14  # values (times included) a schema keeps before they are packed
    CHUNK = 1 << 16  # events interleaved (and written) at a time

    def __init__(self, path: str | os.PathLike[str], clock: Callable[[], float],
                 write: bool = True) -> None:
        """`write=False` keeps the events in memory only (`events`): no file is opened
        or left (a reproduction's runs, whose readers take the events from memory).
        Otherwise the file is made (emptied) now, so a bad path fails before the run."""
        self.path, self._clock = Path(path), clock
        self._file: BinaryIO | None = open(self.path, "wb") if write else None  # type: ignore[assignment]
        self._order = array("H")  # each event's schema id, in the order recorded
        # (kind, *names) -> (schema id, its `values`): one lookup an event
        self._ids: dict[tuple[str, ...], tuple[int, list[Any]]] = {}
        self._schemas: list[_Schema] = []
        self._compress = zstandard.ZstdCompressor(level=LEVEL).compress
        self._decompress = zstandard.ZstdDecompressor().decompress

    def record(self, ev: str, **fields: Any) -> None:
        """`emit` without handing the event back (what the simulator calls)."""
        key = (ev, *fields)
        known = self._ids.get(key)
        if known is None:
            schema = _Schema(ev, key[1:])
            known = self._ids[key] = (len(self._schemas), schema.values)
            self._schemas.append(schema)
        sid, values = known
        self._order.append(sid)
        values.append(self._clock())
        values += fields.values()
        if len(values) >= self.PACK:
            self._schemas[sid].pack(self._compress)

    def emit(self, ev: str, **fields: Any) -> dict[str, Any]:
        """`record`, and the event as a reader decodes its line."""
        self.record(ev, **fields)
        schema = self._schemas[self._order[-1]]
        if not schema.values:  # just packed: the last line of its last block
            return _decoder.decode(self._decompress(schema.packed[-1]).split(b"\n")[-2])
        t = schema.values[-schema.stride]
        return _decoder.decode(_encoder.encode({"t": round(t, 6), "ev": ev, **fields}))

    def _lines(self, kinds: Collection[str] | None = None) -> Iterator[list[bytes]]:
        """The lines of the events (of `kinds`, when given) in the order recorded, a
        chunk at a time: each schema's lines, interleaved back by `_order`."""
        for schema in self._schemas:
            schema.pack(self._compress)
        order = np.frombuffer(self._order, dtype=np.uint16)
        wanted = [kinds is None or s.kind in kinds for s in self._schemas]
        blocks = [s.lines(self._decompress) for s in self._schemas]
        left: list[list[bytes]] = [[] for _ in self._schemas]  # lines taken, not placed
        for a in range(0, len(order), self.CHUNK):
            ids = order[a:a + self.CHUNK]
            chunk = np.empty(len(ids), dtype=object)
            for sid in np.unique(ids).tolist():
                if not wanted[sid]:
                    continue
                at = ids == sid
                need = int(np.count_nonzero(at))
                lines = left[sid]
                while len(lines) < need:
                    lines += next(blocks[sid])
                chunk[at], left[sid] = lines[:need], lines[need:]
            if kinds is not None:
                chunk = chunk[np.array(wanted, dtype=bool)[ids]]
            yield chunk.tolist()

    def events(self, kinds: Collection[str] | None = None) -> list[dict[str, Any]]:
        """The events as a reader would decode them from the file (the same JSON,
        decoded at once; no schema check: the writer is ours), only those of
        `kinds` when given (only those are decoded)."""
        lines = [line for chunk in self._lines(kinds) for line in chunk]
        return _decoder.decode(b"[" + b",".join(lines) + b"]")

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
                        out.write(b"\n".join(chunk) + b"\n")
            else:
                for chunk in self._lines():
                    fh.write(b"\n".join(chunk) + b"\n")
