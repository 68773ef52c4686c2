"""The event trace: schema, an append-only writer, and a validating reader.

A trace is JSON lines. The first line is a `run_start` header; every line has
`t` (seconds since the run started, on the runtime's clock) and `ev` (its kind).
The kinds and required fields in `REQUIRED` are a public contract read by tools
outside the project: fields may be added, never renamed or dropped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

SCHEMA = 1

# kind -> fields every event of that kind must carry (besides `t` and `ev`).
REQUIRED: dict[str, tuple[str, ...]] = {
    "run_start": ("schema", "system", "workload", "runtime", "seed", "config", "version"),
    "rollout_start": ("round", "version"),
    "request_submit": ("round", "group", "sample", "prompt_tokens"),
    "request_admit": ("group", "sample"),
    "request_preempt": ("group", "sample"),
    "request_finish": ("group", "sample", "response_tokens", "status", "versions"),
    "group_complete": ("group",),
    "group_materialized": ("group",),
    "batch_dispatch": ("batch", "groups"),
    "train_start": ("batch",),
    "train_end": ("batch",),
    "optimizer_step": ("step", "version"),
    "weights_published": ("version",),
    "rollout_complete": ("round",),
    "decision": ("what",),
    "placement_switch": ("to",),
    "engine_resize": ("replicas",),
    "engine_reconfigure": ("tp", "replicas"),
    "run_end": (),
}
STATUSES = ("finished", "aborted")

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


class TraceError(ValueError):
    """A trace line that breaks the schema; the message names the file and line."""


class TraceWriter:
    """Appends events as JSON lines and flushes each one, so a crash leaves a
    readable prefix and a reader never sees half a line."""

    def __init__(self, path: str | os.PathLike[str], clock) -> None:
        self.path = Path(path)
        self._clock = clock
        self._file = open(self.path, "ab", buffering=0)

    def emit(self, ev: str, **fields: Any) -> dict[str, Any]:
        event = {"t": round(self._clock(), 6), "ev": ev, **fields}
        self._file.write(_encoder.encode(event) + b"\n")
        return event

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_event(event: Any, where: str) -> None:
    """Raise TraceError naming `where` when `event` breaks the schema."""
    if not isinstance(event, dict):
        raise TraceError(f"{where}: expected a JSON object")
    kind = event.get("ev")
    if not isinstance(kind, str):
        raise TraceError(f"{where}: missing or non-string field 'ev'")
    if kind not in REQUIRED:
        raise TraceError(f"{where}: unknown event kind {kind!r}")
    t = event.get("t")
    if not isinstance(t, int | float) or isinstance(t, bool):
        raise TraceError(f"{where}: missing or non-numeric field 't'")
    missing = [f for f in REQUIRED[kind] if f not in event]
    if missing:
        raise TraceError(f"{where}: {kind} lacks field(s) {', '.join(missing)}")
    if kind == "request_finish" and event["status"] not in STATUSES:
        raise TraceError(f"{where}: status must be one of {STATUSES}, got {event['status']!r}")


def iter_trace(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Yield validated events; the first must be `run_start`."""
    path = Path(path)
    try:
        handle = open(path, "rb")
    except OSError as err:
        raise TraceError(f"{path}: cannot open ({err.strerror})") from None
    with handle:
        lineno = 0
        for lineno, raw in enumerate(handle, start=1):
            where = f"{path}:{lineno}"
            if not raw.endswith(b"\n"):
                raise TraceError(f"{where}: incomplete line (no newline at end)")
            try:
                event = _decoder.decode(raw)
            except msgspec.DecodeError as err:
                raise TraceError(f"{where}: not valid JSON ({err})") from None
            check_event(event, where)
            if lineno == 1 and event["ev"] != "run_start":
                raise TraceError(f"{where}: first event must be run_start, got {event['ev']!r}")
            yield event
        if lineno == 0:
            raise TraceError(f"{path}: empty trace")


def read_trace(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read and validate a whole trace."""
    return list(iter_trace(path))
