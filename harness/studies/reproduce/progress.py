"""A reproduction's progress on stderr: a bar over the papers on a terminal, one line per
finished run (counted within its batch, whose size is known when it is queued) and per
finished paper (counted over the papers, known before the first starts) otherwise. No
count grows. Papers run side by side, so their lines interleave, each naming its batch;
a paper's count is of the papers done so far, in the order they end.
"""

from __future__ import annotations

import threading

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class Batch:
    """The runs of one `run_configs` call: how many, known when they are queued, and how
    many are done. A reproduction's papers queue their runs batch by batch, each after
    reading the last one's results, so no total over all runs is known before the end:
    a line counts within its batch, and its total never grows."""

    def __init__(self, label: str, total: int) -> None:
        self.label, self.total, self.done = label, total, 0


class Reporter:
    """Counts finished runs and papers; a bar over the papers on a terminal, a line per
    run (`[k/n] batch: run`, k of the n runs of its batch) and per paper
    (`name done (s, i of m papers done)`) when piped. The number of papers is known up front."""

    def __init__(self, console: Console | None = None, papers: int = 0) -> None:
        self.console = console or Console(stderr=True)
        self._lock = threading.Lock()
        self._papers, self._papers_done = papers, 0
        self._bar: Progress | None = None
        if self.console.is_terminal:
            self._bar = Progress(TextColumn("{task.description}", style="bold"), BarColumn(),
                                 MofNCompleteColumn(), TextColumn("papers"),
                                 TimeElapsedColumn(), TextColumn("{task.fields[last]}"),
                                 console=self.console, transient=True)
            self._task = self._bar.add_task("reproducing", total=papers, last="")

    def __enter__(self) -> Reporter:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def batch(self, label: str, n: int) -> Batch:
        """`n` runs were queued under `label`."""
        return Batch(label, n)

    def finished(self, batch: Batch, what: str, seconds: float) -> None:
        """Run `what` of `batch` is done."""
        with self._lock:
            batch.done += 1
            line = f"[{batch.done}/{batch.total}] {batch.label}: {what} ({seconds:.1f} s)"
            if self._bar is not None:
                self._bar.update(self._task, last=line[:60])
            else:
                self.console.print(line, highlight=False, soft_wrap=True, markup=False)

    def paper_done(self, name: str, seconds: float) -> None:
        """A whole paper is done."""
        with self._lock:
            self._papers_done += 1
            line = (f"{name} done ({seconds:.1f} s, {self._papers_done} of "
                    f"{self._papers} papers done)")
            if self._bar is not None:
                self._bar.update(self._task, completed=self._papers_done)
                self._bar.console.print(line, highlight=False, markup=False)
            else:
                self.console.print(line, highlight=False, soft_wrap=True, markup=False)
