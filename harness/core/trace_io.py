"""Trace files in either form: JSON lines, or the same lines compressed with zstd.

Why two forms: a simulated run writes its trace in packs of 16k events, and a trace of
plain lines is about 14 times the size of the same lines in zstd (level 1, a few
tenths of a microsecond an event), so the simulator writes `NAME.jsonl.zst` unless
asked for jsonl. JSON lines stay the form other tools read, the one a user can ask
for, and the one a live run writes line by line (it can die at any moment, and a
half-written zstd frame is not a readable prefix).

Why readers sniff the first bytes rather than trust the name: a renamed or
downloaded file keeps its content, not always its suffix. The suffix decides only
what a writer writes.
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path
from typing import BinaryIO

import zstandard

ZST = ".zst"  # a trace whose name ends so is written compressed
MAGIC = b"\x28\xb5\x2f\xfd"  # the first bytes of every zstd frame
LEVEL = 1  # 13.8x smaller, 0.12 us an event; level 3 measured 12.8x for 0.16 us (16k-event frames)
TRACE_NAMES = ("trace.jsonl.zst", "trace.jsonl")  # a run folder's trace, either form
SUFFIXES = (".jsonl.zst", ".jsonl")  # a trace file's name ends in one (writers' choice)

ZstdError = zstandard.ZstdError


def compressed_name(path: str | os.PathLike[str]) -> bool:
    """Whether a writer writes `path` compressed (its name ends in .zst)."""
    return str(path).endswith(ZST)


def is_compressed(path: str | os.PathLike[str]) -> bool:
    """Whether the file holds zstd (its first four bytes), whatever its name."""
    with open(path, "rb") as fh:
        return fh.read(4) == MAGIC


def open_trace(path: str | os.PathLike[str]) -> BinaryIO:
    """The trace's lines as a binary file, decompressed as it is read when the file
    is zstd. Raises OSError as `open` does."""
    fh = open(path, "rb")
    if fh.read(4) != MAGIC:
        fh.seek(0)
        return fh
    fh.seek(0)
    stream = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True,
                                                        closefd=True)
    return io.BufferedReader(stream, 1 << 16)  # type: ignore[arg-type]


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """The whole trace's lines (decompressed when the file is zstd)."""
    with open_trace(path) as fh:
        return fh.read()


def first_line(path: str | os.PathLike[str]) -> bytes:
    """The trace's first line (its `run_start` header), without reading the rest."""
    with open_trace(path) as fh:
        return fh.readline()


def trace_name(runtime: str) -> str:
    """A run folder's trace name for a run on `runtime`: a simulated run writes its
    trace a pack of events at a time (compressed); a live one line by line (plain)."""
    return TRACE_NAMES[0] if runtime == "sim" else TRACE_NAMES[1]


def trace_file(folder: str | os.PathLike[str], stem: str, runtime: str = "sim") -> Path:
    """`folder/stem` with the suffix of the form a run on `runtime` writes by default
    (`trace_name`'s): STEM.jsonl.zst simulated, STEM.jsonl live. Every reproduction
    names its runs' traces here, so a written one takes the simulator's own form."""
    return Path(folder) / (stem + trace_name(runtime).removeprefix("trace"))


def trace_stem(path: str | os.PathLike[str]) -> str:
    """A trace file's name without its trace suffix (.jsonl.zst or .jsonl): the name of
    its run in a progress line (`Path.stem` would leave `.jsonl` on a compressed one)."""
    name = Path(path).name
    for suffix in (".jsonl" + ZST, ".jsonl", ZST):
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return Path(path).stem


def find_trace(folder: str | os.PathLike[str]) -> Path:
    """A run folder's trace: trace.jsonl.zst (what a simulated run writes) or
    trace.jsonl (a live run, or one asked for in jsonl); the first when neither is."""
    for name in TRACE_NAMES:
        if (Path(folder) / name).exists():
            return Path(folder) / name
    return Path(folder) / TRACE_NAMES[0]


def encoded(path: str | os.PathLike[str], lines: bytes) -> bytes:
    """The bytes a writer writes at `path` for these whole lines: one zstd frame when its
    name ends in .zst (what the simulator's writer writes, a frame per pack), else the
    lines as they are."""
    return zstandard.ZstdCompressor(level=LEVEL).compress(lines) if compressed_name(
        path) else lines


def convert(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Write `src`'s lines to `dst`, compressed when `dst`'s name ends in .zst: the
    same lines either way, byte for byte."""
    with open_trace(src) as fin, open(dst, "wb") as fout:
        if compressed_name(dst):
            with zstandard.ZstdCompressor(level=LEVEL).stream_writer(
                    fout, closefd=False) as zout:
                shutil.copyfileobj(fin, zout, 1 << 20)
        else:
            shutil.copyfileobj(fin, fout, 1 << 20)
