"""Notes: one line (or a few, wrapped) on stderr, said once per command.

A run says what it assumed where the user did not say (a stand-in GPU, a default
latency, a price from another table) once, however many engines, runs or worker
processes meet the same case. Why here, at the bottom: the simulator, the workloads
and the studies all say notes, and a worker process's notes must come back to its
parent to be said there (`keep_notes`, `kept`, `say_all`): a plan, reproduction,
regress or sweep on N workers would otherwise say each note N times.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

_said: set[str] = set()
_keeping: list[list[str]] = []  # open keep_notes() lists, innermost last


NOTE_WIDTH = 100 - len("note: ")  # the terminal's 100 columns after the "note: " prefix


def wrapped(message: str) -> str:
    """The note in lines of at most NOTE_WIDTH, each longer line filled on its own with
    its continuation indented two spaces; lines that fit stay as written (a note laid out
    by hand keeps its layout)."""
    return "\n".join(
        line if len(line) <= NOTE_WIDTH else textwrap.fill(
            line, width=NOTE_WIDTH, subsequent_indent="  ", break_on_hyphens=False)
        for line in message.splitlines())


def say_once(message: str) -> None:
    """A note on stderr, once per process (a sweep runs many engines alike), wrapped to
    the terminal's 100 columns here so no caller wraps its own; inside `keep_notes` it
    is kept instead, unsaid."""
    if message in _said:
        return
    if _keeping:
        if message not in _keeping[-1]:
            _keeping[-1].append(message)
        return
    _said.add(message)
    print(f"note: {wrapped(message)}", file=sys.stderr)


@contextmanager
def keep_notes() -> Iterator[list[str]]:
    """The notes said inside, kept in a list (each once, in order) instead of printed:
    for a worker process whose parent says them, so that a plan on many workers says
    each note once, not once per worker. Notes this process already said stay unsaid."""
    kept: list[str] = []
    _keeping.append(kept)
    try:
        yield kept
    finally:
        _keeping.pop()


def kept(fn: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """`fn(*args)`'s dict with the notes its run said, unsaid, under "notes": a worker's
    call whose parent says them (`say_all`)."""
    with keep_notes() as notes:
        out = fn(*args)
    return {**out, "notes": notes}


def say_all(notes: Iterable[str]) -> None:
    """Each note once (a worker's, handed back by `kept`)."""
    for note in notes:
        say_once(note)


def shown_path(path: str) -> str:
    """A source file as a user finds it: from the working folder where it lies under it
    (`systems/mine.py`), else as it is."""
    import os

    return os.path.relpath(path) if path.startswith(os.getcwd()) else path


def raised_at(err: BaseException) -> str:
    """Where `err` was raised, as FILE:LINE (`shown_path`): a system of one's own that
    fails is found without a traceback."""
    import traceback

    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f"{shown_path(last.filename)}:{last.lineno}"


def error_line(err: BaseException) -> str:
    """An error as one line a table or a message can carry: its type and the first
    non-empty line of its text, at most 500 characters (a worker's traceback stays in
    its log, not in a sweep's results)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return f"{type(err).__name__}: {lines[0] if lines else ''}".strip()[:500]
