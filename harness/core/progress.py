"""Progress a person can follow, on stderr so stdout stays the command's result.

On a terminal: a transient bar or spinner. Piped or logged: plain lines, never a
rich bar (one on a non-terminal prints a blank line each time it stops, which is
how `reproduce all | cat` came to print twenty). A bar says its stage in one line,
then, while it runs long enough to need it, how far it is: a line at each further
tenth done, or every EVERY_S seconds, never two within GAP_S (a piped `plan` was
silent for its whole minute). A bar done within GAP_S stays its one line.
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


EVERY_S = 10.0  # piped: a line at least this often while a bar moves...
GAP_S = 1.0  # ...and never two lines of one bar within this many seconds
TENTHS = 10  # a line at each further tenth of the total (past GAP_S)


class Bar:
    """A bar over `total` steps, moved by `advance` or `update`; piped, the line
    `label: TOTAL to go`, then `label: DONE/TOTAL (P%), S s[, NOTE]` as the module
    says, and a closing one if the last said was not the end. A total of 0 is not
    known yet (`update` may tell it): its lines count what is done."""

    def __init__(self, label: str, total: int, enabled: bool = True,
                 clock: Callable[[], float] = time.monotonic,
                 started: float | None = None) -> None:
        self.label, self.total, self.enabled = label, total, enabled
        self.done, self.note = 0, ""
        self._progress: Any = None
        self._task: Any = None
        self._clock = clock
        self._piped = False
        self._start = self._last = 0.0
        self._said: tuple[int, int] | None = None  # (done, tenth) of the last line, if any
        self._began = started  # when the work began, on `clock` (None: as the bar opens)

    def __enter__(self) -> Bar:
        if not self.enabled:
            return self
        out = console()
        if out.is_terminal:
            self._progress = _terminal_bar(out)
            self._progress.start()
            self._task = self._progress.add_task(self.label, total=self.total or None,
                                                 note="")
        else:
            self._piped = True
            self._last = self._clock()
            self._start = self._last if self._began is None else self._began
            to_go = f"{self.total} to go" if self.total else "started"
            print(f"{self.label}: {to_go}", file=sys.stderr, flush=True)
        return self

    def advance(self, steps: int = 1) -> None:
        self.update(self.done + steps)

    def update(self, done: int, total: int | None = None, note: str | None = None) -> None:
        """`done` steps of `total` (unchanged if None) are done; `note` (e.g. how many
        failed) follows the count, on a terminal and piped."""
        self.done = done
        self.total = self.total if total is None else total
        self.note = self.note if note is None else note
        if self._progress is not None:
            self._progress.update(self._task, completed=done, total=self.total or None,
                                  note=self.note)
        elif self._piped:
            self._tell(closing=False)

    def describe(self, text: str) -> None:
        """The bar's label (a terminal only: piped, a stage has one line)."""
        if self._progress is not None:
            self._progress.update(self._task, description=text)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
        elif self._piped and self._said is not None and self._said[0] != self.done:
            self._tell(closing=True)

    def _tell(self, closing: bool) -> None:
        """Piped: the count, if it is time (or the bar is closing)."""
        now = self._clock()
        tenth = TENTHS * self.done // self.total if self.total else 0
        if not closing:
            since = now - self._last
            further = tenth > (self._said[1] if self._said else 0)
            if since < GAP_S or not (further or since >= EVERY_S):
                return
        self._last, self._said = now, (self.done, tenth)
        count = (f"{self.done}/{self.total} ({100 * self.done // self.total}%)" if self.total
                 else f"{self.done} done")
        note = f", {self.note}" if self.note else ""
        print(f"{self.label}: {count}, {now - self._start:.0f} s{note}", file=sys.stderr,
              flush=True)


def _terminal_bar(out: Console) -> Any:
    """A rich bar whose label, not its numbers, gives way on a narrow terminal."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.table import Column

    def whole(width: int) -> Column:
        return Column(min_width=width, no_wrap=True)

    return Progress(TextColumn("{task.description}", table_column=Column(
        no_wrap=True, overflow="ellipsis")), BarColumn(bar_width=20),
        MofNCompleteColumn(table_column=whole(5)), TimeElapsedColumn(table_column=whole(7)),
        TextColumn("{task.fields[note]}", table_column=Column(no_wrap=True)),
        console=out, transient=True)


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


@contextmanager
def late_stage(label: str, after: float = 3.0) -> Iterator[None]:
    """`stage` for work that is often quick: nothing unless it runs `after` seconds, then
    `label` (a spinner on a terminal, one line piped) until it ends. A command reading a
    large trace (65,536 requests: `timeline` 29 s, `export-otlp` 31 s) said nothing the
    whole time; one reading a small trace stays as quiet as it was. A timer thread says
    it: the work itself holds the interpreter and cannot."""
    import threading

    out, lock = console(), threading.Lock()
    shown: list[Any] = []
    over = [False]

    def show() -> None:
        with lock:
            if over[0]:
                return
            if out.is_terminal:
                status = out.status(label)
                status.start()
                shown.append(status)
            else:
                print(label, file=sys.stderr, flush=True)

    timer = threading.Timer(after, show)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            over[0] = True
        timer.cancel()
        for status in shown:
            status.stop()


class LateBar:
    """A `Bar` that appears only once its work has run `after` seconds: a quick command
    stays as quiet as it was (a simulated `run` of a few rounds prints its table alone),
    a long one shows how far it is. `update(done)` as the work goes; closing it closes
    the bar, if one was shown (before any line said after it: the terminal's is
    transient)."""

    def __init__(self, label: str, total: int, after: float = 2.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.total, self.after, self._clock = label, total, after, clock
        self._start = clock()
        self._bar: Bar | None = None

    def update(self, done: int) -> None:
        if self._bar is None:
            if self._clock() - self._start < self.after:
                return
            self._bar = Bar(self.label, self.total, clock=self._clock,
                            started=self._start).__enter__()
        self._bar.update(done)

    def __enter__(self) -> LateBar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
            self._bar = None
