"""The contract's waiting tools on the simulator's coroutine driver (harness/sim/co.py):
`Event`, `Queue`, `Slots`, `first` and `gather`, each a few Waits and no asyncio.

Each does what asyncio's namesake does for a system (tests/test_sim_waits.py runs the
same system on both and compares), with one order only: whoever waited first is
served first, at once, when the awaited thing happens; the heap orders the rest.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from harness.sim.co import Driver, Wait
from harness.sim.heap import cancel


def _done(value: Any = None) -> Wait:
    wait = Wait()
    wait.set_result(value)
    return wait


class Event:
    """A flag; `wait()` until it is set."""

    __slots__ = ("_set", "_waits")

    def __init__(self) -> None:
        self._set = False
        self._waits: list[Wait] = []

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        if self._set:
            return
        self._set = True
        waits, self._waits = self._waits, []
        for wait in waits:
            if not wait.done():  # a waiter cancelled meanwhile is skipped
                wait.set_result(True)

    def clear(self) -> None:
        self._set = False

    def wait(self) -> Wait:
        if self._set:
            return _done(True)
        wait = Wait()
        self._waits.append(wait)
        return wait


class QueueEmpty(Exception):
    """`get_nowait()` on an empty queue."""


class Queue:
    """An unbounded FIFO; `get()` waits for an item, the first getter first."""

    __slots__ = ("_items", "_getters")

    def __init__(self) -> None:
        self._items: deque[Any] = deque()
        self._getters: deque[Wait] = deque()

    def put_nowait(self, item: Any) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(item)
                return
        self._items.append(item)

    def get(self) -> Wait:
        if self._items:
            return _done(self._items.popleft())
        getter = Wait()
        self._getters.append(getter)
        return getter

    def get_nowait(self) -> Any:
        if not self._items:
            raise QueueEmpty()
        return self._items.popleft()

    def qsize(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items


class Slots:
    """At most n holders; a released slot goes to the longest waiter."""

    __slots__ = ("_free", "_waits")

    def __init__(self, n: int) -> None:
        self._free = n
        self._waits: deque[Wait] = deque()

    def locked(self) -> bool:
        return self._free == 0

    def acquire(self) -> Wait:
        if self._free > 0 and not self._waits:
            self._free -= 1
            return _done(True)
        wait = Wait()
        self._waits.append(wait)
        return wait

    def release(self) -> None:
        while self._waits:
            wait = self._waits.popleft()
            if not wait.done():
                wait.set_result(True)  # the slot passes straight to it
                return
        self._free += 1

    def __aenter__(self) -> Wait:
        return self.acquire()

    def __aexit__(self, *exc: object) -> Wait:
        self.release()
        return _done(None)


def first(driver: Driver, waits: Iterable[Wait], timeout: float | None = None) -> Wait:
    """A Wait for the set of `waits` done once the first is (empty at the timeout)."""
    waits = list(waits)
    out = Wait()
    done = {w for w in waits if w.done()}
    if done or not waits:
        out.set_result(done)
        return out

    def fire(_: Any = None) -> None:
        if not out.done():
            if timer is not None:
                cancel(timer)
            out.set_result({w for w in waits if w.done()})

    timer = driver.heap.call_later(timeout, fire) if timeout is not None else None
    for wait in waits:
        wait.add_done_callback(fire)
    return out


def gather(driver: Driver, *aws: Awaitable[Any]) -> Wait:
    """A Wait for the list of results, in order; the first failure (or cancellation)
    of one is the gather's. Coroutines are started here; their failure reaches the
    run only through whoever awaits the gather, as with asyncio.gather."""
    parts = [a if isinstance(a, Wait) else driver.spawn(a, fails_run=False)  # type: ignore[arg-type]
             for a in aws]
    out = Wait()
    if not parts:
        out.set_result([])
        return out
    left = [len(parts)]

    def one(part: Wait) -> None:
        if out.done():
            return
        if part.cancelled():
            out.cancel()
        elif part.exception() is not None:
            out.set_exception(part.exception())  # type: ignore[arg-type]
        else:
            left[0] -= 1
            if left[0] == 0:
                out.set_result([p.result() for p in parts])

    for part in parts:
        part.add_done_callback(one)
    return out


def tools(driver: Driver) -> dict[str, Callable[..., Any]]:
    """The contract's waiting calls on `driver`, by name (what a runtime binds)."""
    return {"spawn": driver.spawn, "sleep": driver.sleep, "event": Event, "queue": Queue,
            "slots": Slots, "first": lambda waits, timeout=None: first(driver, waits, timeout),
            "gather": lambda *aws: gather(driver, *aws)}
