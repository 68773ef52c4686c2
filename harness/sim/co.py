"""Coroutines on the heap: the small driver that runs systems on the simulator.

A system stays an `async def run(rt)`. Here an awaitable is a `Wait`, a one-shot
result with the list of coroutines parked on it; no asyncio Task, Future or handle,
so a coroutine costs a `send` when it resumes and nothing in between (docs/
simulated-core.md, "The heap and the driver"). The rules are asyncio's where a system
could tell the difference:

- `spawn` runs a coroutine's first step on the heap, now but after what is already
  due now (as `create_task` does), never inside the caller;
- a Wait that resolves resumes the coroutines parked on it on the heap, now, in the
  order they parked: the one that resolved it runs on to its next await first, as on
  asyncio, but with one entry on the heap where asyncio takes two turns of its loop;
- `cancel()` of a spawned coroutine raises `Cancelled` at its await and cancels what it
  awaits (as asyncio's does); of one that is running, at its next await;
- a spawned coroutine that raises fails the run: the driver stops the heap and raises
  the error inside the main coroutine at its await, which ends the run with it;
- Ctrl-C (KeyboardInterrupt out of a callback) cancels the main coroutine, so the
  runtime ends its trace with `run_end` "interrupted", then goes on up.

`Cancelled` is asyncio's CancelledError (a subclass), only so the runtime's one
handler serves both runtimes; nothing else of asyncio is used.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Coroutine, Generator
from typing import Any

from harness.sim.heap import Heap, cancel

_PENDING, _DONE, _FAILED, _CANCELLED = range(4)
_NO_ASYNCIO = ("systems wait only on the runtime's objects (rt.sleep, rt.event, rt.queue, "
               "rt.slots, rt.first, rt.gather), not asyncio's")


class Cancelled(asyncio.CancelledError):
    """A coroutine or Wait was cancelled (`cancel()`, or the run was interrupted)."""


class Wait:
    """A result to come: await it, or ask without waiting (`done`, `result`)."""

    __slots__ = ("_state", "_value", "_waiters", "_callbacks")

    def __init__(self) -> None:
        self._state = _PENDING
        self._value: Any = None
        self._waiters: list[Proc] = []
        self._callbacks: list[Callable[[Any], object]] = []

    def __await__(self) -> Generator[Wait, None, Any]:
        if self._state == _PENDING:
            yield self
        if self._state == _DONE:  # `result()`'s usual case, without the call
            return self._value
        return self.result()

    def done(self) -> bool:
        return self._state != _PENDING

    def cancelled(self) -> bool:
        return self._state == _CANCELLED

    def result(self) -> Any:
        if self._state == _DONE:
            return self._value
        if self._state == _FAILED:
            raise self._value
        if self._state == _CANCELLED:
            raise Cancelled()
        raise RuntimeError("result() of a Wait not done")

    def exception(self) -> BaseException | None:
        if self._state == _CANCELLED:
            raise Cancelled()
        if self._state == _PENDING:
            raise RuntimeError("exception() of a Wait not done")
        return self._value if self._state == _FAILED else None

    def add_done_callback(self, fn: Callable[[Any], object]) -> None:
        """`fn(self)` once done (at once when it already is)."""
        if self._state != _PENDING:
            fn(self)
        else:
            self._callbacks.append(fn)

    def set_result(self, value: Any = None) -> None:
        self._finish(_DONE, value)

    def set_exception(self, error: BaseException) -> None:
        self._finish(_FAILED, error)

    def cancel(self) -> bool:
        if self._state != _PENDING:
            return False
        self._finish(_CANCELLED, None)
        return True

    def _finish(self, state: int, value: Any) -> None:
        if self._state != _PENDING:
            raise RuntimeError("a Wait resolves once")
        self._state, self._value = state, value
        waiters, self._waiters = self._waiters, []
        for proc in waiters:  # each resumes on the heap, now, in the order it parked
            proc._driver.heap.call_soon(proc._wake, self)
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(self)


class Proc(Wait):
    """A spawned coroutine: a Wait for its return value."""

    __slots__ = ("_coro", "_driver", "_on", "_running", "_cancel_asked", "_fails_run")

    def __init__(self, coro: Coroutine[Any, Any, Any], driver: Driver,
                 fails_run: bool = True) -> None:
        super().__init__()
        self._coro = coro
        self._driver = driver
        self._fails_run = fails_run
        self._on: Wait | None = None  # what it is parked on
        self._running = False
        self._cancel_asked = False

    def cancel(self) -> bool:
        """Raise Cancelled at its await: now when it is parked (what it awaits is
        cancelled too), else at its next await or first step."""
        if self._state != _PENDING:
            return False
        self._cancel_asked = True
        if not self._running and self._on is not None:
            self._on.cancel()  # wakes this one, which then raises Cancelled
        return True

    def _park_off(self) -> None:
        on, self._on = self._on, None
        if on is not None and self in on._waiters:
            on._waiters.remove(self)

    def _wake(self, wait: Wait) -> None:
        if self._on is not wait:  # no longer parked on it (thrown into meanwhile)
            return
        self._on = None
        self._step(None, None)

    def _throw(self, error: BaseException) -> None:
        """Raise `error` at the coroutine's await (it is parked: not running)."""
        self._park_off()
        self._step(None, error)

    def _step(self, value: Any, error: BaseException | None) -> None:
        if self._state != _PENDING:  # ended already (cancelled before a step came due)
            return
        if self._cancel_asked:
            self._cancel_asked, error = False, Cancelled()
        self._running = True
        try:
            waited = self._coro.send(value) if error is None else self._coro.throw(error)
        except StopIteration as stop:
            self._end(_DONE, stop.value)
            return
        except Cancelled:
            self._end(_CANCELLED, None)
            return
        except (KeyboardInterrupt, SystemExit) as err:  # on up, past everything
            self._running = False
            self._driver._ended(self)
            self._state, self._value = _FAILED, err
            raise
        except BaseException as err:  # noqa: BLE001 - a failed coroutine fails the run
            if isinstance(err, RuntimeError) and str(err) == "no running event loop":
                err = RuntimeError(_NO_ASYNCIO)  # asyncio.sleep and kin, on the simulator
            if self._fails_run:
                self._driver._failed(err)
            self._end(_FAILED, err)
            return
        self._running = False
        if not isinstance(waited, Wait):
            self._step(None, RuntimeError(
                f"a coroutine awaited {type(waited).__name__} on the simulator: {_NO_ASYNCIO}"))
            return
        if self._cancel_asked:  # cancelled while it ran: at this await
            self._step(None, None)
            return
        self._on = waited
        waited._waiters.append(self)

    def _end(self, state: int, value: Any) -> None:
        self._running = False
        self._driver._ended(self)
        self._finish(state, value)


class Driver:
    """Runs coroutines on a heap: `spawn` them, `run(main)` to the end."""

    def __init__(self, heap: Heap) -> None:
        self.heap = heap
        self.live: dict[Proc, None] = {}  # spawned and not ended, in spawn order
        self.failure: BaseException | None = None
        self._interrupted = False
        self._main: Proc | None = None

    def spawn(self, coro: Coroutine[Any, Any, Any] | Wait, fails_run: bool = True) -> Wait:
        """Start `coro` (its first step after the caller's, now); a Wait is already
        under way and comes back as it is (asyncio's ensure_future). `fails_run`: its
        failure fails the run (else only those who await it see it: `gather`'s)."""
        if isinstance(coro, Wait):  # its failure fails the run, as a task's does on asyncio
            if fails_run:  # (the live runtime's `rt.gather` is a coroutine made a task)
                coro.add_done_callback(self._watched)
            return coro
        return self._start(coro, fails_run)

    def _watched(self, wait: Wait) -> None:
        """A spawned Wait (a `gather`, a served group) that failed fails the run."""
        if not wait.cancelled() and wait.exception() is not None:
            self._failed(wait.exception())  # type: ignore[arg-type]

    def _start(self, coro: Coroutine[Any, Any, Any], fails_run: bool = True) -> Proc:
        proc = Proc(coro, self, fails_run)
        self.live[proc] = None
        self.heap.call_soon(proc._step, None, None)
        return proc

    def sleep(self, seconds: float) -> Wait:
        return sleep(self.heap, seconds)

    def _ended(self, proc: Proc) -> None:
        self.live.pop(proc, None)
        if proc is self._main:  # the run is over: what is left is cancelled, not run
            self.heap.stop()

    def _failed(self, error: BaseException) -> None:
        if self.failure is None:
            self.failure = error
            self.heap.stop()

    def _on_sigint(self, signum: int, frame: object) -> None:
        """Ctrl-C: stop after the callback under way (as asyncio's Runner does, the
        main coroutine is then cancelled rather than hit at a random line)."""
        self._interrupted = True
        self.heap.stop()

    def run(self, main: Coroutine[Any, Any, Any]) -> Any:
        """Drive `main` (and all it spawns) to its end and return its result. A failed
        coroutine's error is raised inside `main`; Ctrl-C cancels `main`, then raises
        KeyboardInterrupt; either way every coroutine left is cancelled first."""
        proc = self._main = self._start(main)
        own_sigint = (threading.current_thread() is threading.main_thread()
                      and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
        if own_sigint:
            signal.signal(signal.SIGINT, self._on_sigint)
        try:
            while not proc.done():
                self.heap.run()
                if proc.done():
                    break
                if self._interrupted:
                    raise KeyboardInterrupt
                if self.failure is not None:
                    failure, self.failure = self.failure, None
                    proc._throw(failure)
                elif not self.heap.pending():
                    proc._throw(RuntimeError(
                        "simulation deadlock: every coroutine waits and nothing is scheduled"))
        except KeyboardInterrupt:
            if not proc.done():
                proc._throw(Cancelled())
            self._cancel_all()
            raise
        finally:
            if own_sigint:
                signal.signal(signal.SIGINT, signal.default_int_handler)
        self._cancel_all()
        failure, self.failure = self.failure, None
        if failure is not None and not proc.cancelled() and proc.exception() is None:
            raise failure  # another coroutine failed as main was ending
        return proc.result()

    def cancel_others(self) -> None:
        """Cancel every live coroutine but those running (the caller and whoever it
        runs inside), now, in spawn order: their `finally` blocks run before the
        caller goes on (the runtime's reaping, before the trace's `run_end`)."""
        for proc in list(self.live):
            if not proc.done() and not proc._running:
                proc._cancel_asked = False
                proc._park_off()
                proc._step(None, Cancelled())

    def _cancel_all(self) -> None:
        """Cancel what is left, now (their `finally` blocks run; one that catches
        Cancelled and waits again is left there: the run is over)."""
        self.cancel_others()  # none is running once `run` is back here
        self.heap.stop()


def sleep(heap: Heap, seconds: float) -> Wait:
    """A Wait done `seconds` from now (a component's pause: no coroutine needed)."""
    wait = _Sleep()
    wait.entry = heap.call_later(seconds, wait._fire)
    return wait


class _Sleep(Wait):
    """A sleep: cancelled, its timer goes too (it neither fires nor moves the clock).
    The entry is let go once it fires: it holds this Wait (a cycle the collector,
    off while a run simulates, would not free)."""

    __slots__ = ("entry",)

    def _fire(self) -> None:
        self.entry = None
        self.set_result(None)

    def cancel(self) -> bool:
        if self.entry is not None:
            cancel(self.entry)
            self.entry = None
        return super().cancel()
