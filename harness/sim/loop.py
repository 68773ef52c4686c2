"""An asyncio event loop whose clock is virtual.

When no callback is ready the loop jumps straight to the earliest timer instead
of sleeping, so a simulated hour passes in milliseconds while systems keep
using ordinary asyncio (sleep, futures, queues). Ready callbacks run in FIFO
order and timers at equal times in the order they were scheduled, so a run is
repeatable byte for byte.

Why the loop iteration is written out here rather than inherited: a simulated
run is nothing but callbacks (hundreds of thousands per grid), and the stock
`_run_once` spends most of its time on what a virtual clock does not need (a
selector poll, timeout arithmetic, debug checks, a Python comparison per heap
step). The timers live in a heap of `(when, seq, handle)` tuples, compared in C,
and the iteration keeps the stock semantics exactly: cancelled timers are
skipped, every timer due within the clock resolution runs in this iteration in
(when, seq) order, callbacks scheduled while running wait for the next one.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import itertools
import selectors
from asyncio import events, format_helpers
from collections.abc import Callable
from typing import Any

_CLOCK_RESOLUTION = 1e-9
_new = object.__new__
_copy_context = contextvars.copy_context


class _NoIOSelector(selectors.BaseSelector):
    """Stands in for the OS selector (the loop never polls: it has no I/O)."""

    def __init__(self) -> None:
        self._keys: dict[object, selectors.SelectorKey] = {}

    def register(self, fileobj, events, data=None):  # type: ignore[no-untyped-def]
        key = selectors.SelectorKey(fileobj, id(fileobj), events, data)
        self._keys[fileobj] = key
        return key

    def unregister(self, fileobj):  # type: ignore[no-untyped-def]
        return self._keys.pop(fileobj)

    def select(self, timeout: float | None = None) -> list:
        return []

    def get_map(self):  # type: ignore[no-untyped-def]
        return self._keys

    def close(self) -> None:
        self._keys.clear()


class _Handle(events.Handle):
    """A ready callback, built without the stock constructor's debug lookups."""

    __slots__ = ()

    def __init__(self, callback, args, loop, context):  # type: ignore[no-untyped-def]
        self._context = contextvars.copy_context() if context is None else context
        self._loop = loop
        self._callback = callback
        self._args = args
        self._cancelled = False
        self._repr = None
        self._source_traceback = None

    def cancel(self) -> None:
        if not self._cancelled:
            self._cancelled = True
            self._callback = None
            self._args = None


class _Timer(events.TimerHandle):
    """A timer, likewise; its place in the heap is kept beside it, not compared."""

    __slots__ = ()

    def __init__(self, when, callback, args, loop, context):  # type: ignore[no-untyped-def]
        self._context = contextvars.copy_context() if context is None else context
        self._loop = loop
        self._callback = callback
        self._args = args
        self._cancelled = False
        self._repr = None
        self._source_traceback = None
        self._when = when
        self._scheduled = True

    def cancel(self) -> None:  # the loop skips it when it comes up: no count to keep
        if not self._cancelled:
            self._cancelled = True
            self._callback = None
            self._args = None


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """`time()` is virtual seconds; idle waits advance it to the next timer."""

    def __init__(self) -> None:
        self._now = 0.0
        super().__init__(_NoIOSelector())
        self._clock_resolution = _CLOCK_RESOLUTION
        self._timers: list[tuple[float, int, _Timer]] = []
        self._timer_seq = itertools.count()

    def time(self) -> float:
        return self._now

    def create_task(self, coro, **kwargs):  # type: ignore[no-untyped-def]
        if self._task_factory is not None or kwargs.get("name") is not None:  # type: ignore[attr-defined]
            return super().create_task(coro, **kwargs)
        if self._closed:  # type: ignore[attr-defined]
            raise RuntimeError("Event loop is closed")
        return asyncio.Task(coro, loop=self, **kwargs)

    # call_soon and call_at fill the handle in place (`_new` is object.__new__):
    # the same object as the constructors make, one Python frame fewer per callback.
    def call_soon(self, callback: Callable[..., Any], *args: Any,
                  context: contextvars.Context | None = None) -> events.Handle:
        if self._closed:  # type: ignore[attr-defined]
            raise RuntimeError("Event loop is closed")
        handle = _new(_Handle)
        handle._context = _copy_context() if context is None else context
        handle._loop = self
        handle._callback = callback
        handle._args = args
        handle._cancelled = False
        handle._repr = None
        handle._source_traceback = None
        self._ready.append(handle)  # type: ignore[attr-defined]
        return handle

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any,
                context: contextvars.Context | None = None) -> events.TimerHandle:
        if self._closed:  # type: ignore[attr-defined]
            raise RuntimeError("Event loop is closed")
        timer = _new(_Timer)
        timer._context = _copy_context() if context is None else context
        timer._loop = self
        timer._callback = callback
        timer._args = args
        timer._cancelled = False
        timer._repr = None
        timer._source_traceback = None
        timer._when = when
        timer._scheduled = True
        heapq.heappush(self._timers, (when, next(self._timer_seq), timer))
        return timer

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any,
                   context: contextvars.Context | None = None) -> events.TimerHandle:
        return self.call_at(self._now + delay, callback, *args, context=context)

    def _run_once(self) -> None:
        """Iterations until the loop is stopped: `run_forever` would only call again
        (it stops after the iteration in which `stop()` was called)."""
        ready = self._ready  # type: ignore[attr-defined]
        timers = self._timers
        pop = heapq.heappop
        popleft = ready.popleft
        while True:
            while timers and timers[0][2]._cancelled:
                pop(timers)[2]._scheduled = False
            if not ready and not self._stopping:  # type: ignore[attr-defined]
                if not timers:
                    raise RuntimeError(
                        "simulation deadlock: every task waits and no timer is set")
                if timers[0][0] > self._now:
                    self._now = timers[0][0]
            end = self._now + _CLOCK_RESOLUTION
            while timers and timers[0][0] < end:
                timer = pop(timers)[2]
                timer._scheduled = False
                ready.append(timer)
            for _ in range(len(ready)):
                handle = popleft()
                if handle._cancelled:
                    continue
                try:
                    handle._context.run(handle._callback, *handle._args)
                except (SystemExit, KeyboardInterrupt):
                    raise
                except BaseException as exc:
                    self._callback_failed(handle, exc)
            if self._stopping:  # type: ignore[attr-defined]
                return

    def _callback_failed(self, handle: events.Handle, exc: BaseException) -> None:
        """What the stock `Handle._run` does when a callback raises."""
        source = format_helpers._format_callback_source(  # type: ignore[attr-defined]
            handle._callback, handle._args)  # type: ignore[attr-defined]
        self.call_exception_handler({"message": f"Exception in callback {source}",
                                     "exception": exc, "handle": handle})
