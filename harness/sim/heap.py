"""The simulator's clock: one heap of plain callbacks in virtual time.

asyncio's loop costs a simulated request about two thirds of its CPU (a Task, futures
and handles per request, each callback a turn of the loop); a heap of `(when, seq,
entry)` does the same scheduling for the price of a push and a pop. The order is
explicit: earlier `when` first, and at equal times the order of scheduling (`seq`), so
a run is byte for byte repeatable with no tie left to chance (docs/simulated-core.md,
"Determinism").

An entry is cancelled by clearing its callback in place (no search of the heap); the
pop skips it.
Nothing here knows coroutines: `harness.sim.co` drives those on top.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

Entry = list  # [when, seq, fn, args]: compared in C, made without a Python call


def cancel(entry: Entry) -> None:
    """The heap skips it when it comes up (no search of the heap)."""
    entry[2] = None


def cancelled(entry: Entry) -> bool:
    return entry[2] is None


class Heap:
    """Callbacks by virtual time. `run()` calls them in order until none is left or
    `stop()` is called; an exception raised by a callback leaves `run()` at once (the
    heap keeps what is left, so the caller may clean up and run again).

    An entry is a list `[when, seq, fn, args]`, not an object with methods: a run
    schedules about ten a request, and a list literal costs a third of an object's
    construction; `cancel(entry)` clears its `fn`."""

    def __init__(self) -> None:
        self.now = 0.0
        self._queue: list[Entry] = []
        self._seq = 0
        self._stopped = False

    def time(self) -> float:
        """Seconds since the run started."""
        return self.now

    def call_at(self, when: float, fn: Callable[..., Any], *args: Any) -> Entry:
        """Call `fn(*args)` at `when` (never before now: a time in the past is now)."""
        self._seq += 1
        entry = [when if when > self.now else self.now, self._seq, fn, args]
        heappush(self._queue, entry)
        return entry

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Entry:
        self._seq += 1
        now = self.now
        entry = [now + delay if delay > 0 else now, self._seq, fn, args]
        heappush(self._queue, entry)
        return entry

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> Entry:
        """Now, after everything already scheduled for now."""
        self._seq += 1
        entry = [self.now, self._seq, fn, args]
        heappush(self._queue, entry)
        return entry

    def stop(self) -> None:
        """Leave `run()` after the callback under way."""
        self._stopped = True

    def pending(self) -> int:
        """Entries still in the heap (cancelled ones included until popped)."""
        return len(self._queue)

    def run(self) -> None:
        queue, pop = self._queue, heappop
        self._stopped = False
        while queue and not self._stopped:
            when, _, fn, args = pop(queue)
            if fn is None:
                continue
            self.now = when
            fn(*args)
