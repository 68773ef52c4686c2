"""What both runtimes share: the trace, group ids, task supervision, materialisation.

A runtime subclasses `RunnerBase`, builds its engine, verifier, trainer and
workload, and implements `now()` and `_loop_run(coro)`. A task that fails ends
the run at once with that error (instead of leaving the others waiting), and a
failed run still closes its trace with a `run_end` event that names the error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from harness import __version__
from harness.core import grpo
from harness.core.config import RunConfig
from harness.core.runtime import Gate, Group, PartialGroup, Response
from harness.core.serving import AdaptiveTimeout
from harness.core.trace import SCHEMA, TraceWriter
from harness.shared import serve as serving
from workloads.profile import file_figures

T = TypeVar("T")


class RunnerBase:
    name = "base"

    def __init__(self, cfg: RunConfig, trace_path: str | Path) -> None:
        self.config = cfg
        self._writer = self._open_trace(trace_path)
        self._groups = 0
        self._failure: asyncio.Future[BaseException] | None = None
        self._ended = False
        self._spawned: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None  # the run's, once it runs
        self.engine: Any = None

    def _open_trace(self, trace_path: str | Path) -> TraceWriter:
        """The run's trace writer: one flushed line per event (a live run can die
        at any moment, and its trace is read while it runs)."""
        return TraceWriter(trace_path, self.now)

    # -- the Runtime contract --------------------------------------------
    def now(self) -> float:
        raise NotImplementedError

    def emit(self, ev: str, **fields: Any) -> None:
        self._writer.emit(ev, **fields)

    def keeps(self, ev: str) -> bool:
        """Whether the trace keeps events of kind `ev` (a simulated run's reader may ask
        for some kinds only: `SimRuntime`), so that one it drops need not be built."""
        return True

    def new_group_id(self) -> int:
        self._groups += 1
        return self._groups - 1

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = self._loop.create_task(coro)
        self._spawned.add(task)
        task.add_done_callback(self._task_done)
        return task

    # The waiting tools of the contract, on asyncio: the live runtime's (the simulator
    # overrides them with its own on the event heap, docs/simulated-core.md).
    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def event(self) -> asyncio.Event:
        return asyncio.Event()

    def queue(self) -> asyncio.Queue[Any]:
        return asyncio.Queue()

    def slots(self, n: int) -> asyncio.Semaphore:
        return asyncio.Semaphore(n)

    async def first(self, waits: Iterable[Any], timeout: float | None = None) -> set[Any]:
        done, _ = await asyncio.wait(list(waits), timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        return done

    async def gather(self, *waits: Awaitable[T]) -> list[T]:
        return list(await asyncio.gather(*waits))

    def serve(self, group: Group, *, n: int = 0, keep: int = 0, priority: int = 0,
              on_complete: Callable[[Group], None] | None = None,
              on_response: Callable[[Response], None] | None = None,
              retry: bool = False, gate: Gate | None = None, score: bool = True,
              timeout: AdaptiveTimeout | None = None, resume: PartialGroup | None = None,
              slots: Any = None, materialize: bool = True) -> Awaitable[Group | None]:
        return serving.serve(self, group, n=n, keep=keep, priority=priority,
                             on_complete=on_complete, on_response=on_response, retry=retry,
                             gate=gate, score=score, timeout=timeout, resume=resume,
                             slots=slots, materialize=materialize)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        """One callback, not two: a run spawns a task per sample, and each callback
        is a turn of the loop."""
        self._check(task)
        self._spawned.discard(task)

    async def _reap(self) -> None:
        """A run ends with every task it started: those a system left behind (a
        timer it no longer needs, a check it gave up on) are cancelled and awaited,
        not left for the loop to destroy pending."""
        left = [t for t in self._spawned if not t.done()]
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)

    def _check(self, task: asyncio.Task[Any]) -> None:
        failure = self._failure
        if (failure is not None and not task.cancelled() and task.exception() is not None
                and not failure.done()):
            failure.set_result(task.exception())

    async def _materialize_delay(self) -> None:
        """The control node's own time per group (nothing extra when live)."""

    async def materialize(self, group: Group) -> None:
        """Advantages, and the `group_materialized` event with each response's check
        time (`verify_s`, when every response was checked): a replay of the trace
        (`--workload trace:`) waits them again rather than assume 0 s."""
        await self._materialize_delay()
        self.materialized(group)

    def materialized(self, group: Group) -> None:
        """`materialize` once its delay has passed: advantages, and the event."""
        group.advantages = grpo.advantages(group.rewards)
        if not self.keeps("group_materialized"):  # its lists not built for nothing
            return
        checked = [r.verify_s for r in group.responses]
        timed = {"verify_s": checked} if None not in checked else {}
        self.emit("group_materialized", group=group.id, round=group.round,
                  samples=[r.request.sample for r in group.responses],
                  rewards=list(group.rewards), **timed)

    # -- driving a run ---------------------------------------------------
    def header(self) -> dict[str, Any]:
        """Extra fields for `run_start` (calibrated parameters, live facts)."""
        return {}

    def run(self, system: Any) -> None:
        try:
            self._loop_run(self.run_async(system))
        except BaseException as err:  # the loop itself failed (a simulated deadlock)
            self._end(f"{type(err).__name__}: {err}")
            raise

    async def run_async(self, system: Any) -> None:
        """The whole run on an already running loop (a Ray actor's, for one)."""
        cfg = self.config
        self.emit("run_start", schema=SCHEMA, system=cfg.system, workload=cfg.workload,
                  runtime=self.name, seed=cfg.seed, config=cfg.to_dict(), version=__version__,
                  **self.header(), **file_figures(cfg.workload, getattr(self, "workload", None)))
        try:
            await self._main(system)
        except asyncio.CancelledError:  # Ctrl-C, or the driver cancelled the run
            self._end("interrupted")
            raise
        except GeneratorExit:  # the loop died under this coroutine: `run` ends the trace
            raise
        except BaseException as err:
            self._end(f"{type(err).__name__}: {err}")
            raise
        self._end(None)

    def _end(self, error: str | None) -> None:
        """The last event, once: `run_end` (naming the error if any), then close."""
        if self._ended:
            return
        self._ended = True
        if error is None:
            self.emit("run_end", preemptions=self.engine.preemptions)
        else:
            self.emit("run_end", error=error)
        self._writer.close()

    def _loop_run(self, coro: Any) -> None:
        raise NotImplementedError

    async def _setup(self) -> None:
        """Start what needs a running event loop (a live engine)."""

    async def _teardown(self) -> None:
        """Stop what `_setup` started."""

    async def _main(self, system: Any) -> None:
        """The system as a task beside a failure future: a task that fails ends the
        run at once (the simulator's driver does this itself: `SimRuntime._main`)."""
        # Kept for `spawn`: asking asyncio for the running loop costs a system call
        # (getpid) each time, and a run spawns a task per sample.
        self._loop = asyncio.get_running_loop()
        self._failure = self._loop.create_future()
        main: asyncio.Task[Any] | None = None
        try:
            await self._setup()
            main = asyncio.get_running_loop().create_task(system.run(self))
            await asyncio.wait([main, self._failure], return_when=asyncio.FIRST_COMPLETED)
            if self._failure.done():
                raise self._failure.result()
            main.result()
        finally:
            if main is not None and not main.done():  # failed, or interrupted
                main.cancel()
            await self._reap()
            await self._teardown()
