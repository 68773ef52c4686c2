"""Progress a person can follow, on stderr so stdout stays the command's result.

On a terminal: a transient bar or spinner. Piped or logged: one plain line per
stage and nothing else (a rich bar on a non-terminal prints a blank line each
time it stops, which is how `reproduce all | cat` came to print twenty).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console

Update = Callable[[str], None]


def counted(n: int, one: str, many: str | None = None) -> str:
    """`n` and its noun, singular for exactly one ("1 process", "2 processes"): a
    progress line read as English ("1 processes" was). `many` defaults to `one` + "s"."""
    return f"{n} {one if n == 1 else many or one + 's'}"


def console() -> Console:
    return Console(stderr=True)


def say(text: str) -> None:
    """A line that stays (above a bar or spinner on a terminal)."""
    console().print(text, highlight=False, markup=False, soft_wrap=True)


class Bar:
    """A bar over `total` steps; piped, just the line `label: TOTAL to go`."""

    def __init__(self, label: str, total: int, enabled: bool = True) -> None:
        self.label, self.total, self.enabled = label, total, enabled
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> Bar:
        if not self.enabled:
            return self
        out = console()
        if out.is_terminal:
            from rich.progress import Progress

            self._progress = Progress(console=out, transient=True)
            self._progress.start()
            self._task = self._progress.add_task(self.label, total=self.total)
        else:
            print(f"{self.label}: {self.total} to go", file=sys.stderr, flush=True)
        return self

    def advance(self, steps: int = 1) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, steps)

    def describe(self, text: str) -> None:
        """The bar's label (a terminal only: piped, a stage has one line)."""
        if self._progress is not None:
            self._progress.update(self._task, description=text)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


@contextmanager
def stage(label: str) -> Iterator[Update]:
    """A spinner with `label` on a terminal, its text changed by the update function
    it yields; piped, each new text is one line. On a terminal the stage's time is
    said when it ends."""
    out = console()
    start = time.monotonic()
    if out.is_terminal:
        with out.status(label) as status:
            last = [label]

            def update(text: str) -> None:
                last[0] = text
                status.update(text)

            yield update
        out.print(f"{last[0]}: {time.monotonic() - start:.0f} s", highlight=False,
                  markup=False)
        return
    print(label, file=sys.stderr, flush=True)
    seen = [label]

    def line(text: str) -> None:
        if text != seen[0]:
            seen[0] = text
            print(text, file=sys.stderr, flush=True)

    yield line
