"""The reproductions on every core: runs in worker processes, papers side by side.

A reproduction is mostly simulated runs (run_grid / run_configs), with some
pandas and matplotlib between them. `reproduce(names, ..., jobs)` starts a pool
of `jobs` worker processes and one thread per paper. The threads take turns:
only the thread holding the turn runs Python code (its paper's tables and
figures), and it gives the turn away only while its runs are in the pool. So no
two papers ever draw at once (matplotlib is not thread-safe), the pool is fed
by every paper that has runs to do, and each paper's own code still runs in
its own order on the same inputs: the outputs are byte for byte those of a
one-process run (`--jobs 1`), which runs everything in this process.

A configuration asked for twice in one reproduction (a sweep's point that is also a
table's, as RolloutPipe's F_w = 2 is) is simulated once (`SameRuns`): the simulator is
deterministic, so the second trace is a copy of the first and its result the same.

Progress goes to stderr (progress.py's `Reporter`).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import copy
import gc
import multiprocessing
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.core.config import RunConfig
from harness.core.notes import keep_notes, say_once
from harness.core.trace_io import trace_stem
from harness.core.workers import stop_workers
from harness.run.execute import Reader, execute
from harness.sim import knobs
from harness.studies.reproduce import preload
from harness.studies.reproduce.progress import Batch, Reporter

Rows = list[dict[str, Any]]


def default_jobs() -> int:
    """Every core this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def run_one(cfg: RunConfig, path: Path, reader: Reader | None = None, write: bool = True
            ) -> tuple[Any, float]:
    """One run (in a worker, or here): its metric rows, or what `reader` makes of
    its events (made where the run was, not in the papers' process), and its
    wall seconds. `write=False`: no trace file (the events are read from memory)."""
    start = time.perf_counter()
    out = execute(cfg, path, reader, write)
    return out, time.perf_counter() - start


def run_kept(cfg: RunConfig, path: Path, reader: Reader | None, write: bool
             ) -> tuple[Any, float, list[str]]:
    """`run_one` in a worker process, with the notes its run says kept for the parent to
    say: each worker would say them once, `make reproduce` on N cores N times."""
    with keep_notes() as notes:
        out, took = run_one(cfg, path, reader, write)
    return out, took, notes


class SameRuns:
    """The first run of each configuration (and reader) in one reproduction: its result
    (or, in the process pool, its future) and its trace, for a later ask to copy. Every
    asker gets a copy of the result, so that none sees what another did to its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._first: dict[str, tuple[Any, Path]] = {}

    @staticmethod
    def key(cfg: RunConfig, reader: Reader | None) -> str:
        name = None if reader is None else f"{reader.__module__}.{reader.__qualname__}"
        return repr((cfg.to_dict(), name))

    def first(self, key: str, start: Callable[[], Any], path: Path) -> tuple[Any, Path | None]:
        """The first run's handle and trace, or (None: this is the first) `start()`'s."""
        with self._lock:
            if key in self._first:
                return self._first[key]
            handle = self._first[key] = (start(), path)
        return handle[0], None


class RunPool:
    """Where `run_configs` sends its runs while a reproduction is on: a process
    pool, or (one job) this process. Calls come from the papers' threads, each
    holding the turn (`turn`), which the pool lends out while the runs are away."""

    def __init__(self, reporter: Reporter, executor: cf.ProcessPoolExecutor | None = None,
                 turn: threading.Lock | None = None, step_model: str | None = None,
                 same: SameRuns | None = None, traces: bool = True) -> None:
        self.reporter = reporter
        self._executor = executor
        self._turn = turn
        self.step_model = step_model  # every run's step model, or None: each its own
        self._same = same or SameRuns()  # shared by the passes of one reproduction
        self.traces = traces  # write each run's trace file (else its events stay in memory)

    def _override(self, cfg: RunConfig, path: Path) -> tuple[RunConfig, Path]:
        """A run of the step-model twin: its step model set, its trace in a folder of its
        own (beside the paper's, so the paper's traces are kept)."""
        twin = copy.deepcopy(cfg)
        twin.sim.step_model = self.step_model  # type: ignore[assignment]
        folder = path.parent / self.step_model  # type: ignore[operator]
        return twin, folder / path.name  # the folder made only if written (execute)

    def run(self, tasks: list[tuple[RunConfig, Path]], label: str,
            reader: Reader | None = None) -> list[Any]:
        if self.step_model is not None:
            tasks = [self._override(cfg, path) for cfg, path in tasks]
            label = f"{label} ({self.step_model})"
        batch = self.reporter.batch(label, len(tasks))
        if knobs.current() is not None:  # a would-need probe: here, and never the same run
            return [self._here(cfg, path, reader, batch) for cfg, path in tasks]
        if self._executor is None:
            out = []
            for cfg, path in tasks:
                (rows, took), first = self._same.first(
                    SameRuns.key(cfg, reader),
                    lambda c=cfg, p=path: run_one(c, p, reader, self.traces), path)
                out.append(self._hand_out(rows, took, batch, first, path))
            return out
        return self._away(tasks, batch, reader)

    def _here(self, cfg: RunConfig, path: Path, reader: Reader | None, batch: Batch) -> Any:
        rows, took = run_one(cfg, path, reader, self.traces)
        self.reporter.finished(batch, trace_stem(path), took)
        return rows

    def _hand_out(self, rows: Any, took: float, batch: Batch, first: Path | None,
                  path: Path) -> Any:
        """A run's result for one asker: its own copy (the kept one stays intact), and for
        a repeated run the first one's trace, copied to where this one's would go."""
        if first is None:
            self.reporter.finished(batch, trace_stem(path), took)
        else:
            if self.traces and first.resolve() != path.resolve():  # a table asked twice
                path.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(first, path)
            self.reporter.finished(batch, f"{trace_stem(path)} (a copy of "
                                   f"{trace_stem(first)})", 0.0)
        return copy.deepcopy(rows)

    def _away(self, tasks: list[tuple[RunConfig, Path]], batch: Batch,
              reader: Reader | None) -> list[Any]:
        """The runs in the worker processes, this paper's turn lent out meanwhile."""
        executor = self._executor
        assert executor is not None and self._turn is not None
        futures: dict[cf.Future[Any], list[int]] = {}
        copies: dict[int, Path] = {}  # a repeated run -> the first one's trace
        for i, (cfg, path) in enumerate(tasks):
            future, first = self._same.first(SameRuns.key(cfg, reader),
                                             lambda c=cfg, p=path:
                                             executor.submit(run_kept, c, p, reader,
                                                             self.traces), path)
            futures.setdefault(future, []).append(i)
            if first is not None:
                copies[i] = first
        results: list[Any] = [None] * len(tasks)
        self._turn.release()  # other papers go on while these runs are away
        try:
            for future in cf.as_completed(futures):
                rows, took, notes = future.result()
                for note in notes:
                    say_once(note)
                for i in futures[future]:
                    results[i] = self._hand_out(rows, took, batch, copies.get(i),
                                                tasks[i][1])
        finally:
            self._turn.acquire()
        return results


# The pool of the paper being reproduced in this thread: a paper of the claims' roofline
# twin sends its runs to a pool that sets their step model, beside the papers of the main
# pass in the same worker processes.
_ACTIVE: ContextVar[RunPool | None] = ContextVar("rolloutbench_run_pool", default=None)


def active() -> RunPool | None:
    """The pool of the reproduction in progress in this thread, if any."""
    return _ACTIVE.get()


@contextlib.contextmanager
def profiles_folder(traces: Path) -> Iterator[Path]:
    """Where a paper writes the workload profiles its runs read (AReaL's and verl's
    fitted lengths): TRACES/profiles when the traces are kept (or no reproduction is
    under way), else a temporary folder removed once its runs are done, so that a
    reproduction without --traces leaves nothing on disk."""
    import tempfile

    pool = active()
    if pool is None or pool.traces:
        yield traces / "profiles"
        return
    with tempfile.TemporaryDirectory(prefix="rolloutbench-profiles-") as tmp:
        yield Path(tmp)


@dataclass
class Pass:
    """Papers to reproduce with the same arguments; `step_model` set: every run of theirs
    on that step model (the claims' roofline twin), else each run's own."""

    names: list[str]
    kwargs: dict[str, Any]
    step_model: str | None = None
    traces: bool = True  # write every run's trace file under the paper's OUT/runs/ folder


def is_twin() -> bool:
    """Whether this thread reproduces the claims' roofline twin, which needs the claims
    only: no figure, no study that feeds none."""
    return step_model_override() is not None


def step_model_override() -> str | None:
    """The step model every run of the reproduction in progress is forced to (the
    claims' roofline twin), or None: each run's own. For what a paper computes
    outside simulated runs (PipelineRL's Appendix A)."""
    pool = active()
    return None if pool is None else pool.step_model


def reproduce(papers: dict[str, Callable[..., list[Any]]], names: list[str],
              kwargs: dict[str, Any], jobs: int, console: Console | None = None,
              step_model: str | None = None) -> dict[str, list[Any]]:
    """Run `papers[name](**kwargs)` for each name on `jobs` processes; returns each
    paper's result by name. The first paper to fail raises, after the others end.
    Progress goes to `console` (stderr by default). `step_model` runs every simulated
    run with that step model instead of its own (the claims' roofline twin)."""
    return reproduce_passes(papers, [Pass(names, kwargs, step_model)], jobs, console)[0]


def reproduce_passes(papers: dict[str, Callable[..., list[Any]]], passes: list[Pass],
                     jobs: int, console: Console | None = None) -> list[dict[str, list[Any]]]:
    """Several passes over papers at once, on one pool (a pass's runs fill the cores while
    another's papers draw): each pass's results by paper name, in the passes' order."""
    papers_count = sum(len(one.names) for one in passes)
    if jobs > 1 and sys.platform == "linux":  # before the freeze: frozen with the rest
        preload.preload()  # imported once here, not once in each forked worker
    with Reporter(console, papers_count) as reporter, _frozen():
        same = SameRuns()
        if jobs <= 1:
            return [_one_process(papers, p, reporter, same) for p in passes]
        context = multiprocessing.get_context("fork") if sys.platform == "linux" else None
        with cf.ProcessPoolExecutor(jobs, mp_context=context) as executor:
            executor.submit(int).result()  # fork every worker now, before any thread starts
            try:
                return _threads(papers, passes, reporter, executor, same)
            except BaseException:  # Ctrl-C, or a paper failed: stop the workers now
                _stop(executor)
                raise


def _stop(executor: cf.ProcessPoolExecutor) -> None:
    """The queued runs dropped and the running ones ended with their workers
    (`stop_workers`): dropping the queue alone let verl-async's twin run on for 30 s
    after a Ctrl-C."""
    stop_workers(executor)


@contextlib.contextmanager
def _frozen() -> Iterator[None]:
    """What is alive when a reproduction starts (the modules: pandas, matplotlib, the
    simulator) outlives it: frozen, the collector's full passes skip it, here and in the
    workers forked from here (a third of their collection time)."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _one_process(papers: dict[str, Callable[..., list[Any]]], one: Pass,
                 reporter: Reporter, same: SameRuns) -> dict[str, list[Any]]:
    out = {}
    token = _ACTIVE.set(RunPool(reporter, step_model=one.step_model, same=same,
                                traces=one.traces))
    try:
        for name in one.names:
            start = time.perf_counter()
            out[name] = papers[name](**one.kwargs)
            reporter.paper_done(name, time.perf_counter() - start)
    finally:
        _ACTIVE.reset(token)
    return out


def _threads(papers: dict[str, Callable[..., list[Any]]], passes: list[Pass],
             reporter: Reporter, executor: cf.ProcessPoolExecutor, same: SameRuns
             ) -> list[dict[str, list[Any]]]:
    turn = threading.Lock()
    outs: list[dict[str, list[Any]]] = [{} for _ in passes]
    errors: list[BaseException] = []

    def paper(name: str, at: int, run_pool: RunPool) -> None:
        _ACTIVE.set(run_pool)  # this thread's own context
        start = time.perf_counter()
        with turn:
            try:
                outs[at][name] = papers[name](**passes[at].kwargs)
            except BaseException as err:  # raised in the caller's thread, below
                errors.append(err)
                return
            label = name if passes[at].step_model is None else \
                f"{name} ({passes[at].step_model})"
            reporter.paper_done(label, time.perf_counter() - start)

    threads = []
    for at, one in enumerate(passes):
        run_pool = RunPool(reporter, executor, turn, one.step_model, same, one.traces)
        threads += [threading.Thread(target=paper, args=(n, at, run_pool),
                                     name=f"reproduce-{n}-{at}", daemon=True)
                    for n in one.names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return outs
