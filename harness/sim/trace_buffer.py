"""The simulator's trace writer: the same lines as `TraceWriter`, buffered.

A simulated run emits an event every few microseconds of wall time; one system
call per event (what a live run needs, so that a crash leaves a readable
prefix) would cost more than simulating it, and a run is over in well under a
second. So the lines are kept in memory and written in blocks of whole lines,
at the latest on `close`, and the kept lines give the run's events back without
reading the file again (`events`).

Why the line is assembled by hand: an event is `{"t": T, "ev": EV, **fields}`,
and building that dict costs as much as encoding it. The writer encodes the
time once per instant, the kind once per run, and the fields as one object
whose opening brace it drops; msgspec writes no spaces, so the bytes are those
of encoding the whole event (`tests/test_sim_speed.py` checks it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import msgspec

from harness.core.trace import TraceWriter

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


class BufferedTraceWriter(TraceWriter):
    FLUSH_LINES = 8192  # lines per block written

    def __init__(self, path: str | os.PathLike[str], clock: Callable[[], float],
                 write: bool = True) -> None:
        """`write=False` keeps the events in memory only (`events`): no file is opened
        or left (a reproduction's runs, whose readers take the events from memory)."""
        if write:
            super().__init__(path, clock)
        else:
            self.path, self._clock, self._file = Path(path), clock, None  # type: ignore[assignment]
        self._lines: list[bytes] = []
        self._kinds: list[str] = []  # each line's event kind
        self._written = 0  # lines already in the file
        self._now: float | None = None
        self._head = b""  # b'{"t":T' of the current instant
        self._kind_bytes: dict[str, bytes] = {}  # kind -> b',"ev":"KIND"'

    def record(self, ev: str, **fields: Any) -> None:
        """`emit` without handing the event back (what the simulator calls)."""
        now = self._clock()
        if now is not self._now:  # events come in bursts at one instant
            self._now = now
            self._head = b'{"t":' + _encoder.encode(round(now, 6))
        kind = self._kind_bytes.get(ev)
        if kind is None:
            kind = self._kind_bytes[ev] = b',"ev":' + _encoder.encode(ev)
        if not fields:
            line = self._head + kind + b"}"
        elif "t" in fields or "ev" in fields:  # a field that overrides: the plain way
            line = _encoder.encode({"t": round(now, 6), "ev": ev, **fields})
        else:
            line = self._head + kind + b"," + _encoder.encode(fields)[1:]
        self._lines.append(line)
        self._kinds.append(ev)
        if len(self._lines) - self._written >= self.FLUSH_LINES:
            self.flush()

    def emit(self, ev: str, **fields: Any) -> dict[str, Any]:
        self.record(ev, **fields)
        return _decoder.decode(self._lines[-1])

    def flush(self) -> None:
        """Write the lines not yet in the file."""
        lines = self._lines
        if self._file is None:
            return
        if self._written < len(lines) and not self._file.closed:
            self._file.write(b"\n".join(lines[self._written:]) + b"\n")
            self._written = len(lines)

    def events(self, kinds: Collection[str] | None = None) -> list[dict[str, Any]]:
        """The events as a reader would decode them from the file (the same JSON,
        decoded at once; no schema check: the writer is ours), only those of
        `kinds` when given."""
        lines = self._lines
        if kinds is not None:
            lines = [line for line, kind in zip(lines, self._kinds, strict=True)
                     if kind in kinds]
        return _decoder.decode(b"[" + b",".join(lines) + b"]")

    def close(self) -> None:
        if self._file is None:
            return
        if not self._file.closed:
            self.flush()
        super().close()
