"""The simulator's clock: one heap of plain callbacks in virtual time.

asyncio's loop costs a simulated request about two thirds of its CPU (a Task, futures
and handles per request, each callback a turn of the loop); a heap of `(when, seq,
entry)` does the same scheduling for the price of a push and a pop. The order is
explicit: earlier `when` first, and at equal times the order of scheduling (`seq`), so
a run is byte for byte repeatable with no tie left to chance (docs/architecture.md,
"The simulated core (#36)").

An entry is cancelled by clearing it in place (no search of the heap); the pop skips it.
Nothing here knows coroutines: `harness.sim.co` drives those on top.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any


class Entry:
    """One scheduled call; `cancel()` makes the heap skip it."""

    __slots__ = ("fn", "args")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn: Callable[..., Any] | None = fn
        self.args = args

    def cancel(self) -> None:
        self.fn = None

    def cancelled(self) -> bool:
        return self.fn is None


class Heap:
    """Callbacks by virtual time. `run()` calls them in order until none is left or
    `stop()` is called; an exception raised by a callback leaves `run()` at once (the
    heap keeps what is left, so the caller may clean up and run again)."""

    def __init__(self) -> None:
        self.now = 0.0
        self._queue: list[tuple[float, int, Entry]] = []
        self._seq = 0
        self._stopped = False

    def time(self) -> float:
        """Seconds since the run started."""
        return self.now

    def call_at(self, when: float, fn: Callable[..., Any], *args: Any) -> Entry:
        """Call `fn(*args)` at `when` (never before now: a time in the past is now)."""
        entry = Entry(fn, args)
        self._seq += 1
        heapq.heappush(self._queue, (max(when, self.now), self._seq, entry))
        return entry

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Entry:
        return self.call_at(self.now + delay, fn, *args)

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> Entry:
        """Now, after everything already scheduled for now."""
        return self.call_at(self.now, fn, *args)

    def stop(self) -> None:
        """Leave `run()` after the callback under way."""
        self._stopped = True

    def pending(self) -> int:
        """Entries still in the heap (cancelled ones included until popped)."""
        return len(self._queue)

    def run(self) -> None:
        queue, pop = self._queue, heapq.heappop
        self._stopped = False
        while queue and not self._stopped:
            when, _, entry = pop(queue)
            fn = entry.fn
            if fn is None:
                continue
            entry.fn = None  # done: a late cancel() is harmless
            self.now = when
            fn(*entry.args)
