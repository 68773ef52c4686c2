"""Other systems' rollout logs as rolloutbench traces (`rolloutbench import`).

One reader per format (`slime`, `verl`, `pipelinerl`, `areal`, `polytrace`, `roll`,
`tinker`, `otlp`, `slime-perf`), each a module of this package named as its format
(`slime_perf` for `slime-perf`), that turns that project's files into `Sample`s, read
from that project's own
source (named in each module and in docs/import.md); `build` makes the trace.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import msgspec

from harness.core.files import write_atomic
from harness.core.trace import TraceError, check_event, check_types
from harness.core.trace_io import encoded
from harness.imports.build import build
from harness.imports.sample import Source, SourceError

FORMATS = ("slime", "verl", "pipelinerl", "areal", "polytrace", "roll", "tinker", "otlp",
           "slime-perf")

__all__ = ["FORMATS", "Source", "SourceError", "read", "to_trace", "write"]


def read(fmt: str, sources: list[Path], tokenizer: Path | None = None) -> Source:
    """The samples of `sources` in format `fmt`; SourceError names what is wrong."""
    if fmt not in FORMATS:
        raise SourceError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    # only the one asked for; a format's module is its name with `_` for `-`
    reader = importlib.import_module(f"harness.imports.{fmt.replace('-', '_')}")
    return reader.read(sources, tokenizer) if fmt == "verl" else reader.read(sources)


def to_trace(source: Source) -> list[dict[str, Any]]:
    """The trace's events, each checked against the schema as a reader would (a
    source holding a whole trace, `otlp`, was checked as it was read)."""
    if source.events is not None:
        return source.events
    events = build(source)
    for i, event in enumerate(events, start=1):
        try:
            check_event(event, f"event {i}")
            check_types(event, f"event {i}")
        except TraceError as err:  # a bug here, not in the input: say where
            raise AssertionError(f"import built an invalid trace: {err}") from None
    return events


def write(events: list[dict[str, Any]], out: Path) -> None:
    """The trace as JSON lines, compressed when `out` ends in .zst (`trace_io.encoded`),
    written whole or not at all."""
    write_atomic(out, encoded(out, msgspec.json.Encoder().encode_lines(events)))
