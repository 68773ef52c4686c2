"""An asyncio event loop whose clock is virtual.

When no callback is ready the loop jumps straight to the earliest timer instead
of sleeping, so a simulated hour passes in milliseconds while systems keep
using ordinary asyncio (sleep, futures, queues). Ready callbacks run in FIFO
order and timers at equal times in the order they were scheduled, so a run is
repeatable byte for byte.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import selectors
from asyncio import events


class _NoIOSelector(selectors.BaseSelector):
    """Stands in for the OS selector: 'waiting' advances the virtual clock."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self._loop = loop
        self._keys: dict[object, selectors.SelectorKey] = {}

    def register(self, fileobj, events, data=None):  # type: ignore[no-untyped-def]
        key = selectors.SelectorKey(fileobj, id(fileobj), events, data)
        self._keys[fileobj] = key
        return key

    def unregister(self, fileobj):  # type: ignore[no-untyped-def]
        return self._keys.pop(fileobj)

    def select(self, timeout: float | None = None) -> list:
        if timeout is None:
            raise RuntimeError("simulation deadlock: every task waits and no timer is set")
        if timeout > 0:
            self._loop._advance()
        return []

    def get_map(self):  # type: ignore[no-untyped-def]
        return self._keys

    def close(self) -> None:
        self._keys.clear()


class _OrderedTimer(events.TimerHandle):
    """A timer that breaks ties at equal times by scheduling order."""

    __slots__ = ("_seq",)

    def __init__(self, when, callback, args, loop, context, seq: int):  # type: ignore[no-untyped-def]
        super().__init__(when, callback, args, loop, context=context)
        self._seq = seq

    def __lt__(self, other: object) -> bool:
        if isinstance(other, _OrderedTimer):
            return (self._when, self._seq) < (other._when, other._seq)
        return NotImplemented


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """`time()` is virtual seconds; idle waits advance it to the next timer."""

    def __init__(self) -> None:
        self._now = 0.0
        super().__init__(_NoIOSelector(self))
        self._clock_resolution = 1e-9
        self._timer_seq = itertools.count()

    def call_at(self, when, callback, *args, context=None):  # type: ignore[no-untyped-def]
        self._check_closed()  # type: ignore[attr-defined]
        timer = _OrderedTimer(when, callback, args, self, context, next(self._timer_seq))
        heapq.heappush(self._scheduled, timer)  # type: ignore[attr-defined]
        timer._scheduled = True
        return timer

    def time(self) -> float:
        return self._now

    def _advance(self) -> None:
        scheduled = self._scheduled  # type: ignore[attr-defined]
        if scheduled:
            self._now = max(self._now, scheduled[0].when())
