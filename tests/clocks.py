"""Two clocks for tests that drive components by hand, without a whole runtime.

`SimClock`: the simulator's own heap and coroutine driver (what `SimRuntime` runs
on), with `sleep` and `gather` as a test's coroutine needs them. `VirtualAsyncio`: a
stock asyncio loop whose clock jumps to the next timer instead of sleeping, for the
asyncio side of a comparison (the live runtime's waiting tools, `hidden_score`)."""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Awaitable, Coroutine
from typing import Any

from harness.sim import waits
from harness.sim.co import Driver, Wait
from harness.sim.heap import Heap

_running: list[Driver] = []  # the driver of the test under way (sleep, gather, spawn)


class SimClock(Heap):
    """A heap to hand a component (a SimEngine's clock) and a driver to run the test's
    coroutine on: `run_until_complete`, as with a loop; inside it, `sleep`, `gather`
    and `spawn` of this module reach the same driver."""

    def __init__(self) -> None:
        super().__init__()
        self.driver = Driver(self)

    def run_until_complete(self, coro: Coroutine[Any, Any, Any]) -> Any:
        _running.append(self.driver)
        try:
            return self.driver.run(coro)
        finally:
            _running.pop()

    def close(self) -> None:
        """Nothing to release (a loop's counterpart)."""


def sleep(seconds: float) -> Wait:
    return _running[-1].sleep(seconds)


def gather(*parts: Awaitable[Any]) -> Wait:
    return waits.gather(_running[-1], *parts)


def spawn(coro: Coroutine[Any, Any, Any]) -> Wait:
    return _running[-1].spawn(coro)


class _Jump(selectors.BaseSelector):
    """Never waits: a poll with a timeout moves the loop's clock by that timeout."""

    def __init__(self, loop: VirtualAsyncio) -> None:
        self._loop = loop
        self._keys: dict[Any, selectors.SelectorKey] = {}

    def register(self, fileobj, events, data=None):  # type: ignore[no-untyped-def]
        key = selectors.SelectorKey(fileobj, id(fileobj), events, data)
        self._keys[fileobj] = key
        return key

    def unregister(self, fileobj):  # type: ignore[no-untyped-def]
        return self._keys.pop(fileobj)

    def select(self, timeout: float | None = None) -> list[Any]:
        if timeout:
            self._loop.now += timeout
        return []

    def get_map(self):  # type: ignore[no-untyped-def]
        return self._keys


class VirtualAsyncio(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self.now = 0.0
        super().__init__(_Jump(self))

    def time(self) -> float:
        return self.now
