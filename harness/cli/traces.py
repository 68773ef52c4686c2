"""`rolloutbench trace-convert SRC DST`: a trace in the other form (plain JSON lines or
zstd), the same lines byte for byte. Every rolloutbench reader takes either form;
this is for other tools, which read plain lines, and for compressing a live run's
trace (written plain, line by line) once it is over.

`rolloutbench export-otlp TRACE --out FILE.json`: the trace as OTLP/JSON for
OpenTelemetry tools (harness/analysis/otlp.py); `rolloutbench import otlp` reads it
back."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import (
    console,
    fail,
    refuse_existing,
    refuse_overwrite,
    trace_of,
    warning,
)

commands = typer.Typer()  # added to the app in harness/cli/app.py


@commands.command("trace-convert")
def convert_cmd(
    src: Annotated[Path, typer.Argument(help="A trace, plain JSON lines or zstd, or a "
                                        "run folder (its trace).")],
    dst: Annotated[Path, typer.Argument(
        help="The trace to write: NAME.jsonl.zst (zstd) or NAME.jsonl (plain JSON "
             "lines).")],
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing DST.")]
    = False,
) -> None:
    """Write a trace in the other form: DST named .jsonl.zst is zstd, .jsonl plain JSON
    lines (no other name); the lines are the same, byte for byte (`zstd -d` reads DST)."""
    import os
    from collections import deque

    from harness.core.files import discard
    from harness.core.progress import late_stage
    from harness.core.trace import Trace, TraceError, TraceReader
    from harness.core.trace_io import SUFFIXES, ZstdError, convert

    src = trace_of(src)
    if not dst.name.endswith(SUFFIXES):  # trace.gz got plain lines under a gzip name
        fail(f"DST: {dst}: a trace is JSON lines; name it .jsonl.zst (compressed) or "
             ".jsonl (plain)")
    refuse_overwrite("DST", dst, [("SRC", src)])
    refuse_existing("DST", dst, force)
    reader = TraceReader(src, strict=True, allow_cut=True)  # checked as `metrics` reads it
    try:
        with late_stage(f"checking {src}"):
            (last,) = deque(reader, maxlen=1)  # every line read, only the last kept
    except TraceError as err:
        fail(str(err))
    # (an empty trace was refused above); a cut line is copied too: readers leave it out
    why = [Trace(src, [last]).problem(), reader.cut_line and f"line {reader.cut_line} "
           "was cut mid-write"]
    if any(why):
        warning(f"{src}: incomplete trace ({'; '.join(filter(None, why))}); converted as it "
                "is, line for line")
    # written beside DST under another name, then renamed: stopped or failed, no half a
    # trace is left; its folder made as every other command makes its output's
    part = dst.with_name(f".{os.getpid()}.{dst.name}")  # the same ending: the same form
    try:
        dst.parent.mkdir(parents=True, exist_ok=True)
        convert(src, part)
        os.replace(part, dst)
        console.print(f"wrote {dst}", highlight=False)
    except OSError as err:
        fail(f"{dst}: cannot write ({err.strerror})")
    except ZstdError as err:
        fail(f"{src}: not a readable zstd stream ({err})")
    finally:
        discard(part)


@commands.command("export-otlp")
def export_otlp_cmd(
    trace: Annotated[Path, typer.Argument(help="A trace, plain JSON lines or zstd, or a "
                                          "run folder (its trace).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The OTLP/JSON file to write "
                                      "(.json).")],
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing --out.")]
    = False,
) -> None:
    """Write a trace as OTLP/JSON (an ExportTraceServiceRequest) with the RL span names
    proposed for OpenTelemetry (rl.loop, rl.sample, rl.reward, rl.train, rl.sync) and
    gen_ai.* token counts, for Jaeger, Tempo or any OTLP tool. The same trace always
    writes the same bytes; `rolloutbench import otlp FILE` gives the trace back. See
    docs/import.md, "OpenTelemetry"."""
    import msgspec

    from harness.analysis.otlp import export
    from harness.core.files import write_atomic
    from harness.core.progress import late_stage
    from harness.core.trace import TraceError, read_prefix

    if out.suffix != ".json":
        fail(f"--out: {out}: OTLP/JSON is one JSON document; name it .json")
    refuse_existing("--out", out, force)
    trace = trace_of(trace)
    refuse_overwrite("--out", out, [("TRACE", trace)])
    try:  # as far as it goes (a run killed, a last line cut mid-write), said once
        with late_stage(f"reading {trace}"):
            read = read_prefix(trace, allow_cut=True)
    except TraceError as err:
        fail(str(err))
    events = read.events
    if not read.complete:
        warning(f"{trace}: incomplete trace ({read.problem()}); exported as far as it goes")
    from harness.core.metrics import untimed

    if events and untimed(events[0]):  # timeline and gantt refuse it; its spans keep order
        fmt = events[0]["import"].get("format", "another system's")
        warning(f"{trace}: imported from {fmt} logs without times: every span is at t = 0 "
                f"(exported for its structure and token counts)")
    with late_stage(f"export-otlp: the spans of {len(events):,} events"):
        doc = export(events)
    try:
        with late_stage(f"writing {out}"):
            write_atomic(out, msgspec.json.encode(doc).decode() + "\n")
    except OSError as err:
        fail(f"--out: {out}: cannot write ({err.strerror})")
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    console.print(f"wrote {out}: {len(spans)} spans, {len(events)} events "
                  f"(rolloutbench import otlp {out} --out T.jsonl gives the trace back)",
                  highlight=False)
