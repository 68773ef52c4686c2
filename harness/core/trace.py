"""The event trace: schema, an append-only writer, and a validating reader.

A trace is JSON lines, plain or compressed with zstd (`harness.core.trace_io`:
readers take either, by the file's first bytes). The first line is a `run_start`
header; every line has `t` (seconds since the run started, on the runtime's
clock) and `ev` (its kind). The kinds and required fields in `REQUIRED` are a
public contract read by tools outside the project: fields may be added, never
renamed or dropped without a new schema version.

The reader refuses a bad line with one line naming the file, the line and the
field: invalid JSON, a missing field, `t` not a number or going backwards, an
event before `run_start`; `strict` reading (what the metrics need) also checks
the types in `FIELD_TYPES`. `read_prefix` reads an interrupted run's trace.

Schema history (`run_start`'s `schema`; the reader reads every one up to `SCHEMA`
and refuses a newer one rather than misread it):
  1  `train_start` carried `micro`: micro-batches on the simulator, samples live.
  2  `train_start` carries `micro_batches` and `samples` on both runtimes; `micro`
     is kept for the index of one micro-batch's span (nothing writes it yet).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from harness.core.trace_io import ZstdError, is_compressed, open_trace

SCHEMA = 2  # the schema this version writes; 1 to SCHEMA are read

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
    """Writes events as JSON lines and flushes each one, so a crash leaves a
    readable prefix and a reader never sees half a line. A new writer starts the
    file afresh: a run repeated into the same path replaces the old trace rather
    than appending a second run to it."""

    def __init__(self, path: str | os.PathLike[str], clock) -> None:
        self.path = Path(path)
        self._clock = clock
        self._file = open(self.path, "wb", buffering=0)

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


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return _is_int(v) or isinstance(v, float)


# Field types that `strict` reading checks: the required fields, and the optional
# ones the metrics or the contract name (those may also be null). type name -> test.
TYPE_TESTS = {
    "an integer": _is_int,
    "a number or null": lambda v: v is None or _is_number(v),
    "a string": lambda v: isinstance(v, str),
    "an object": lambda v: isinstance(v, dict),
    "a list of integers": lambda v: isinstance(v, list) and all(map(_is_int, v)),
    "a list of numbers": lambda v: isinstance(v, list) and all(map(_is_number, v)),
    "a list of [version, tokens] pairs": lambda v: isinstance(v, list) and all(
        isinstance(p, list) and len(p) == 2 and all(map(_is_int, p)) for p in v),
}
_INT, _NUM, _STR = "an integer", "a number or null", "a string"
FIELD_TYPES: dict[str, dict[str, str]] = {
    "run_start": {"schema": _INT, "system": _STR, "workload": _STR, "runtime": _STR,
                  "seed": _INT, "config": "an object", "version": _STR},
    "rollout_start": {"round": _INT, "version": _INT},
    "request_submit": {"round": _INT, "group": _INT, "sample": _INT, "prompt_tokens": _INT,
                       "resumed_tokens": _INT, "prompt": _INT},
    "request_admit": {"group": _INT, "sample": _INT},
    "request_preempt": {"group": _INT, "sample": _INT},
    "request_finish": {"group": _INT, "sample": _INT, "response_tokens": _INT,
                       "status": _STR, "versions": "a list of integers",
                       "version_spans": "a list of [version, tokens] pairs"},
    "group_complete": {"group": _INT},
    "group_materialized": {"group": _INT, "samples": "a list of integers",
                           "rewards": "a list of numbers", "verify_s": "a list of numbers"},
    "batch_dispatch": {"batch": _INT, "groups": "a list of integers"},
    "train_start": {"batch": _INT, "micro_batches": _INT, "samples": _INT},
    "train_end": {"batch": _INT},
    "optimizer_step": {"step": _INT, "version": _INT, "ess": _NUM, "ess_clamped": _NUM,
                       "lag_mean": _NUM, "lag_max": _NUM},
    "weights_published": {"version": _INT},
    "rollout_complete": {"round": _INT},
    "decision": {"what": _STR},
    "placement_switch": {"to": _STR},
    "engine_resize": {"replicas": _INT},
    "engine_reconfigure": {"tp": _INT, "replicas": _INT},
    "run_end": {},
}


def _known_schema(value: Any) -> bool:
    """Schemas 1 to `SCHEMA` are read; any other value, a newer schema above all,
    is refused: its fields may mean what this reader does not know."""
    return _is_int(value) and 1 <= value <= SCHEMA


def _show(value: Any) -> str:
    """A JSON value for a one-line message: escaped, and cut when long."""
    text = _encoder.encode(value).decode(errors="replace")
    return text if len(text) <= 40 else text[:37] + "..."


def check_event(event: Any, where: str) -> None:
    """Raise TraceError naming `where` and the field when `event` breaks the schema."""
    if not isinstance(event, dict):
        raise TraceError(f"{where}: expected a JSON object, got {_show(event)}")
    if "ev" not in event:
        raise TraceError(f"{where}: missing field 'ev' (the event kind)")
    kind = event["ev"]
    if not isinstance(kind, str):
        raise TraceError(f"{where}: field 'ev' must be a string, got {_show(kind)}")
    if kind not in REQUIRED:
        raise TraceError(f"{where}: unknown event kind {kind!r}")
    if "t" not in event:
        raise TraceError(f"{where}: {kind} lacks field 't' (seconds since the run started)")
    t = event["t"]
    if not _is_number(t):
        raise TraceError(f"{where}: {kind} field 't' must be a number, got {_show(t)}")
    if t < 0:
        raise TraceError(f"{where}: {kind} field 't' must be >= 0, got {_show(t)}")
    missing = [f for f in REQUIRED[kind] if f not in event]
    if missing:
        raise TraceError(f"{where}: {kind} lacks field(s) {', '.join(map(repr, missing))}")
    if kind == "run_start" and not _known_schema(event["schema"]):
        raise TraceError(f"{where}: run_start field 'schema' is {_show(event['schema'])}, "
                         f"not 1 to {SCHEMA}")
    if kind == "request_finish" and event["status"] not in STATUSES:
        raise TraceError(f"{where}: request_finish field 'status' must be one of {STATUSES}, "
                         f"got {_show(event['status'])}")


def check_types(event: dict[str, Any], where: str) -> None:
    """Raise TraceError naming `where` and the field when a field the metrics read has
    the wrong type (`event` has passed `check_event`)."""
    kind = event["ev"]
    for name, want in FIELD_TYPES[kind].items():
        if name in event and not TYPE_TESTS[want](event[name]):
            raise TraceError(f"{where}: {kind} field {name!r} must be {want}, "
                             f"got {_show(event[name])}")


class CutLine(TraceError):
    """The last line has no newline: the writer was stopped mid-line."""


class TraceReader:
    """Reads a trace line by line, validating each event and the order of events:
    `run_start` first and only once, `t` never going backwards. `strict` also
    checks field types (`FIELD_TYPES`) and that nothing follows `run_end`.
    With `allow_cut`, a last line cut mid-write is left out (its number is kept
    in `cut_line`) instead of raising."""

    def __init__(self, path: str | os.PathLike[str], *, strict: bool = False,
                 allow_cut: bool = False) -> None:
        self.path = Path(path)
        self.strict = strict
        self.allow_cut = allow_cut
        self.cut_line: int | None = None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        path = self.path
        try:
            handle = open_trace(path)
        except OSError as err:
            raise TraceError(f"{path}: cannot open ({err.strerror})") from None
        try:
            yield from self._events(handle)
        except ZstdError as err:
            raise TraceError(f"{path}: not a readable zstd stream ({err}); "
                             "a compressed trace cut short?") from None

    def _events(self, handle: BinaryIO) -> Iterator[dict[str, Any]]:
        path = self.path
        with handle:
            events = 0
            last_t = 0.0
            end_line = lineno = 0
            for lineno, raw in enumerate(handle, start=1):
                where = f"{path}:{lineno}"
                if not raw.endswith(b"\n"):  # only the last line can lack it
                    if self.allow_cut:
                        self.cut_line = lineno
                        break
                    raise CutLine(f"{where}: incomplete line (no newline at end)")
                try:
                    event = _decoder.decode(raw)
                except msgspec.DecodeError as err:
                    bad = TraceError(f"{where}: not valid JSON ({err})")
                    raise (_named(bad, path, False) if lineno == 1 else bad) from None
                try:
                    check_event(event, where)
                except TraceError as err:
                    raise (_named(err, path, True) if lineno == 1 else err) from None
                if self.strict:
                    check_types(event, where)
                kind = event["ev"]
                if lineno == 1 and kind != "run_start":
                    raise TraceError(f"{where}: first event must be run_start, got {kind!r}")
                if lineno > 1 and kind == "run_start":
                    raise TraceError(f"{where}: a second run_start (two runs in one file?)")
                if end_line and self.strict:
                    raise TraceError(f"{where}: {kind} after run_end (line {end_line})")
                if event["t"] < last_t:
                    raise TraceError(f"{where}: {kind} field 't' goes backwards: {event['t']} "
                                     f"after {last_t} on line {lineno - 1}")
                last_t = event["t"]
                end_line = lineno if kind == "run_end" else end_line
                events += 1
                yield event
            if events == 0 and lineno == 0 and path.stat().st_size and is_compressed(path):
                # zstd gives back whole blocks only: the bytes are there, no line decodes
                raise TraceError(f"{path}: nothing decodable: a zstd trace cut inside its "
                                 f"first block (a run killed before it flushed one?)")
            if events == 0:
                raise TraceError(f"{path}: empty trace" + (
                    f" (line {self.cut_line} was cut mid-write)" if self.cut_line else ""))


def _named(err: TraceError, path: Path, first_line_is_json: bool) -> TraceError:
    """A first line that is no event: name the kind of file it is, when known."""
    from harness.core.file_kind import not_a_trace

    reason = not_a_trace(path, first_line_is_json)
    return TraceError(reason) if reason else err


def iter_trace(path: str | os.PathLike[str], *, strict: bool = False,
               allow_cut: bool = False) -> Iterator[dict[str, Any]]:
    """Yield validated events; the first must be `run_start`. `allow_cut`: a last line
    cut mid-write ends the events instead of raising (for a reader whose command has
    said so once already: `read_prefix`)."""
    return iter(TraceReader(path, strict=strict, allow_cut=allow_cut))


def read_trace(path: str | os.PathLike[str], *, strict: bool = False,
               allow_cut: bool = False) -> list[dict[str, Any]]:
    """Read and validate a whole trace (`allow_cut`: as `iter_trace`)."""
    return list(iter_trace(path, strict=strict, allow_cut=allow_cut))


@dataclass
class Trace:
    """A trace read as far as it goes (`read_prefix`): a run that was interrupted
    has no `run_end`, and maybe a last line cut mid-write (left out)."""

    path: Path
    events: list[dict[str, Any]]
    cut_line: int | None = None

    @property
    def complete(self) -> bool:
        """The run ended normally: the trace ends in a `run_end` without an error."""
        last = self.events[-1]
        return last["ev"] == "run_end" and "error" not in last and self.cut_line is None

    def problem(self) -> str:
        """Why the trace is not complete, in a few words ('' when it is)."""
        last = self.events[-1]
        if last["ev"] == "run_end" and "error" in last:
            why = f"the run ended with an error ({_show(last['error'])})"
        elif last["ev"] != "run_end":
            why = "no run_end (an interrupted run?)"
        else:
            why = ""
        if self.cut_line is not None:
            why += "; " if why else ""
            why += f"line {self.cut_line} was cut mid-write and is left out"
        return why


def read_prefix(path: str | os.PathLike[str], *, allow_cut: bool = False,
                strict: bool = True) -> Trace:
    """Read a trace that may stop short (strictly typed by default, as the metrics need
    it). Every line must be valid; only the end may be missing, and with `allow_cut`
    the last line may be cut mid-write (a run killed while writing it): every command
    that reads a user's trace reads it so and says once that it is partial
    (`Trace.problem`)."""
    reader = TraceReader(path, strict=strict, allow_cut=allow_cut)
    events = list(reader)
    return Trace(Path(path), events, reader.cut_line)
