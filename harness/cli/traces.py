"""`rolloutbench trace-convert SRC DST`: a trace in the other form (plain JSON lines or
zstd), the same lines byte for byte. Every rolloutbench reader takes either form;
this is for other tools, which read plain lines, and for compressing a live run's
trace (written plain, line by line) once it is over."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import fail, refuse_overwrite

commands = typer.Typer()  # added to the app in harness/cli/app.py


@commands.command("trace-convert")
def convert_cmd(
    src: Annotated[Path, typer.Argument(help="A trace, plain JSON lines or zstd.")],
    dst: Annotated[Path, typer.Argument(
        help="The trace to write: compressed (zstd) when its name ends in .zst, plain "
             "JSON lines otherwise (e.g. trace.jsonl).")],
) -> None:
    """Write a trace in the other form: DST ending in .zst is zstd, any other name plain
    JSON lines; the lines are the same, byte for byte (`zstd -d` reads DST too)."""
    from harness.core.trace import TraceError, TraceReader
    from harness.core.trace_io import ZstdError, convert

    refuse_overwrite("DST", dst, [("SRC", src)])
    if src.is_dir():
        fail(f"{src}: is a directory, expected a trace file (trace.jsonl.zst or trace.jsonl)")
    try:
        next(iter(TraceReader(src)))  # a trace: its first line is a run_start
    except TraceError as err:
        fail(str(err))
    try:
        convert(src, dst)
    except OSError as err:
        fail(f"{dst}: cannot write ({err.strerror})")
    except ZstdError as err:
        dst.unlink(missing_ok=True)
        fail(f"{src}: not a readable zstd stream ({err})")
