"""`rolloutbench import otlp`: a trace back from the OTLP/JSON `export-otlp` wrote.

The export keeps every trace event whole, as a span event `rolloutbench.<ev>` with
its line (`rolloutbench.event`) and its place in the trace (`rolloutbench.seq`;
harness/analysis/otlp.py says why). This reader collects those span events from
anywhere in the file, puts the lines back in order and checks them as a trace is
checked, so export then import gives the run's own trace, metrics and all. The
spans themselves (`rl.*`, `gen_ai.*`) are for other tools and are not read.

Accepted layouts: one ExportTraceServiceRequest object (what the export writes, and
what Jaeger's and Tempo's OTLP JSON import take) or JSON lines of them (the
collector's file exporter, which a file may have passed through). A seq missing or
twice, a span event without its line, or a line that is not a trace event is a
SourceError naming the file, line and field: a trace with a hole would mislead
every figure made from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from harness.core.trace import TraceError, check_event, check_types
from harness.imports.fields import check, files, jsonl, need
from harness.imports.sample import Source, SourceError

PREFIX = "rolloutbench."
_decoder = msgspec.json.Decoder()


def requests(path: Path) -> list[tuple[str, Any]]:
    """("FILE:LINE", ExportTraceServiceRequest) for each request in an OTLP/JSON file:
    the whole file as one JSON value, else one per line."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise SourceError(f"{path}: cannot read ({err.strerror})") from None
    try:
        return [(f"{path}:1", _decoder.decode(data))]
    except msgspec.DecodeError:
        return list(jsonl(path))


def spans(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """("FILE:LINE span N", span) for every span of the file, with the file's shape
    checked on the way (resourceSpans, scopeSpans, spans: lists of objects)."""
    out = []
    for where, request in requests(path):
        for r, resource in enumerate(need(request, "resourceSpans", "a list", where)):
            for s, scope in enumerate(need(resource, "scopeSpans", "a list",
                                           f"{where} resourceSpans[{r}]")):
                inner = f"{where} resourceSpans[{r}].scopeSpans[{s}]"
                for n, span in enumerate(need(scope, "spans", "a list", inner)):
                    out.append((f"{inner}.spans[{n}]", span))
    return out


def value(any_value: Any, where: str) -> Any:
    """The plain value of an OTLP/JSON AnyValue (int64 as a string or a number)."""
    if not isinstance(any_value, dict):
        raise SourceError(f"{where}: expected an AnyValue object, got "
                          f"{type(any_value).__name__}")
    if not any_value:
        return None
    kind, raw = next(iter(any_value.items()))
    if kind == "stringValue":
        return check(raw, kind, "a string", where)
    if kind == "boolValue":
        return check(raw, kind, "a boolean", where)
    if kind == "doubleValue":
        return float(check(raw, kind, "a number", where))
    if kind == "intValue":
        if isinstance(raw, str) and raw.lstrip("-").isdigit():
            return int(raw)
        return check(raw, kind, "an integer", where)
    if kind == "arrayValue":
        values = check(raw, kind, "an object", where).get("values", [])
        return [value(v, f"{where}[{i}]") for i, v in enumerate(values)]
    if kind == "kvlistValue":
        values = check(raw, kind, "an object", where).get("values", [])
        return attrs(values, where)
    raise SourceError(f"{where}: unknown AnyValue kind {kind!r}")


def attrs(key_values: Any, where: str) -> dict[str, Any]:
    """An OTLP KeyValue list as a dict."""
    check(key_values, "attributes", "a list", where)
    out = {}
    for kv in key_values:
        key = need(kv, "key", "a string", where)
        out[key] = value(kv.get("value", {}), f"{where} attribute {key!r}")
    return out


def _event(where: str, raw: Any) -> tuple[int, dict[str, Any]] | None:
    """(seq, trace event) of one span event, or None when it is not one of ours."""
    name = need(raw, "name", "a string", where)
    if not name.startswith(PREFIX):
        return None
    found = attrs(raw.get("attributes", []), where)
    for key, kind in (("seq", "an integer"), ("event", "a string")):
        if PREFIX + key not in found:
            raise SourceError(f"{where}: span event {name!r} lacks {PREFIX + key!r} (not "
                              f"written by rolloutbench export-otlp?)")
        check(found[PREFIX + key], PREFIX + key, kind, where)
    try:
        event = _decoder.decode(found[PREFIX + "event"])
    except msgspec.DecodeError:
        raise SourceError(f"{where}: {PREFIX}event is not a JSON object") from None
    if not isinstance(event, dict) or name != PREFIX + str(event.get("ev")):
        raise SourceError(f"{where}: {PREFIX}event does not hold a {name[len(PREFIX):]!r} "
                          f"event")
    return found[PREFIX + "seq"], event


def read(sources: list[Path]) -> Source:
    """The trace `rolloutbench export-otlp` wrote into one OTLP/JSON file."""
    paths = files(sources, "*.json", "OTLP JSON files")
    if len(paths) != 1:
        raise SourceError(f"{paths[0]} and {len(paths) - 1} more: give one OTLP file (one "
                          f"trace each)")
    path = paths[0]
    found: dict[int, dict[str, Any]] = {}
    for where, span in spans(path):
        for n, raw in enumerate(span.get("events", [])):
            got = _event(f"{where}.events[{n}]", raw)
            if got is None:
                continue
            seq, event = got
            if seq in found:
                raise SourceError(f"{where}.events[{n}]: {PREFIX}seq {seq} appears twice")
            found[seq] = event
    if not found:
        # none of ours: not `rolloutbench export-otlp`'s file; ROLL's OTLP is `import roll`
        raise SourceError(f"{path}: no {PREFIX}* events (ROLL's? import roll)")
    missing = next((i for i in range(len(found)) if i not in found), None)
    if missing is not None:
        raise SourceError(f"{path}: {PREFIX}seq {missing} is missing (of {len(found)} "
                          f"events): the file was cut or filtered")
    events = [found[i] for i in range(len(found))]
    _check(events, path)
    return Source(format="otlp", system=str(events[0].get("system", "")), files=[str(path)],
                  samples=[], events=events)


def _check(events: list[dict[str, Any]], path: Path) -> None:
    """The rules a trace reader keeps: each event valid and typed, `run_start` first
    and once, `t` never going backwards."""
    last = 0.0
    for i, event in enumerate(events):
        where = f"{path} {PREFIX}seq {i}"
        try:
            check_event(event, where)
            check_types(event, where)
        except TraceError as err:
            raise SourceError(str(err)) from None
        if (event["ev"] == "run_start") != (i == 0):
            raise SourceError(f"{where}: run_start must come first and once, got "
                              f"{event['ev']!r}")
        if event["t"] < last:
            raise SourceError(f"{where}: {event['ev']} field 't' goes backwards: "
                              f"{event['t']} after {last}")
        last = event["t"]
