"""Scripts of submissions and pool-wide calls, run on `SimEngine`s behind an `EnginePool`
and on the compiled replicas (`SteppedEngines`) behind `PinnedPool`, for the tests
(tests/test_fastcore_control.py) and the measurement (fastcore/control_bench.py).

A script is a closed loop (`reference.closed_loop`'s: request i's finished response
submits request i + roots) plus calls at given instants, each a coroutine of its own on
the heap, as a system's would be: abort of some groups' requests, pause (keep, abort or
drain), resume, and a weight install (its transfer, in flight, with or without
recomputation). An aborted response goes on from its tokens (`Request.continued`), on
its replica or the next. Each side returns its engine events in emission order and a log
of what Python saw (each response as it returned, each call as it ended) with the heap's
seq counter and the count of engine events at that moment: equal logs mean the core's
events and entries fell where `SimEngine`'s did in the heap's global order.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from harness.core.runtime import PauseMode, Prompt, Request, Response
from harness.sim.co import Driver, Wait, sleep
from harness.sim.engine import SimEngine, simulated_response
from harness.sim.fastcore import Stream
from harness.sim.heap import Heap
from harness.sim.perf import DecodeModel, TableDecodeModel
from harness.sim.placement import EnginePool

Row = tuple[float, int, int, int, int, int]  # t, kind, group, engine, a, b (see Recorder)
OPS = ("abort", "keep", "abort-all", "drain", "resume", "install", "install-recompute")


class PinnedPool:
    """`EnginePool`'s submission and pool-wide calls over `SteppedEngines`, each request
    on its own replica (`Request.replica`): abort by replica in index order, pause on
    every replica (a drain one after another, each until it is empty), resume, install
    (begin on every replica, one transfer, end on every replica)."""

    def __init__(self, heap: Heap, decode: DecodeModel | TableDecodeModel, kv: int,
                 max_running: int, engines: int, target_tokens: Callable[[Request], int],
                 room: int = 64) -> None:
        from harness.sim.fastcore.stepped import SteppedEngines  # numba only when asked

        self.core = SteppedEngines(heap, decode, kv, max_running, engines, self._returned,
                                   room)
        self.heap, self.replicas, self._target = heap, engines, target_tokens
        self.requests: list[Request] = []  # by core index
        self._done: list[Callable[[Response], Any] | None] = []
        self._index: dict[str, int] = {}  # request id -> core index, until it returns

    def submit_then(self, request: Request, done: Callable[[Response], Any]) -> None:
        resume, core = request.resume, self.core
        if resume is None:
            i = core.submit(request.replica, request.priority, request.prompt.tokens,
                            self._target(request))
        else:
            i = core.submit_resumed(request.replica, request.priority, request.prompt.tokens,
                                    self._target(request), resume.tokens,
                                    resume.version_spans)
        self.requests.append(request)
        self._done.append(done)
        self._index[request.id] = i

    def response(self, i: int) -> Response:
        """Request i's response, as `SimEngine._end` builds it."""
        status, tokens, spans = self.core.outcome(i)
        req = self.requests[i]
        return simulated_response(req, tokens, spans, status)

    def _returned(self, i: int) -> None:
        done, self._done[i] = self._done[i], None
        del self._index[self.requests[i].id]
        done(self.response(i))  # type: ignore[misc]

    async def abort(self, request_ids: Iterable[str]) -> list[Response]:
        by_engine: dict[int, list[int]] = {}
        for rid in request_ids:
            i = self._index.get(rid)
            if i is not None:
                by_engine.setdefault(self.requests[i].replica, []).append(i)
        out: list[Response] = []
        for e in sorted(by_engine):
            out += [self.response(i) for i in self.core.abort(e, by_engine[e])]
        return out

    async def pause(self, mode: PauseMode = "keep") -> None:
        core = self.core
        for e in range(self.replicas):
            if mode == "drain":
                drained = Wait()
                if core.drain(e, drained.set_result):
                    await drained
            core.pause_now(e, mode)

    async def resume(self) -> None:
        for e in range(self.replicas):
            self.core.resume_now(e)

    async def install(self, version: int, transfer_s: float, in_flight: bool,
                      recompute: bool = False) -> None:
        paused = [self.core.install_begin(e) for e in range(self.replicas)]
        await sleep(self.heap, transfer_s)
        for e, was in enumerate(paused):
            self.core.install_end(e, version, was, recompute)


class Recorder:
    """`SimEngine`'s emit as rows (t, kind, group, engine, a, b): a submission (0) with
    its prompt and resumed tokens, an admission (1), a preemption (2) with a 1 where it
    recomputes after an install, a request's end (3) with its tokens and a 1 if aborted."""

    def __init__(self, heap: Heap) -> None:
        self.heap = heap
        self.rows: list[Row] = []
        self.engine: dict[int, int] = {}  # group -> the replica of its latest submission

    def __call__(self, kind: str, group: int, engine: int = -1, prompt_tokens: int = 0,
                 resumed_tokens: int = 0, response_tokens: int = 0, status: str = "",
                 reason: str = "", **_: object) -> None:
        t = self.heap.now
        if kind == "request_submit":
            self.engine[group] = engine
            self.rows.append((t, 0, group, engine, prompt_tokens, resumed_tokens))
        elif kind == "request_admit":
            self.rows.append((t, 1, group, engine, 0, 0))
        elif kind == "request_preempt":
            self.rows.append((t, 2, group, self.engine[group], int(reason == "recompute"), 0))
        else:
            self.rows.append((t, 3, group, self.engine[group], response_tokens,
                              int(status == "aborted")))


def core_rows(pool: PinnedPool) -> list[Row]:
    """The core's events as `Recorder`'s rows."""
    from harness.sim.fastcore.control import ABORTED, RESUMED
    from harness.sim.fastcore.timeline import FINISH, STATE, SUBMIT

    ev, rq = pool.core.events(), pool.core.rq
    groups = np.array([r.group for r in pool.requests], dtype=np.int64)
    b = np.zeros(len(ev.t), dtype=np.int64)
    b[ev.kind == SUBMIT] = rq[ev.request[ev.kind == SUBMIT], RESUMED]
    b[ev.kind == FINISH] = rq[ev.request[ev.kind == FINISH], STATE] == ABORTED
    return list(zip(ev.t.tolist(), ev.kind.tolist(), groups[ev.request].tolist(),
                    ev.engine.tolist(), ev.value.tolist(), b.tolist(), strict=True))


@dataclass(frozen=True)
class Script:
    """A closed loop over `stream` (its first `roots` requests at their times) and calls
    (t, op, arg): "abort" (arg: request ids), "keep", "abort-all", "drain" (pauses),
    "resume", "install" and "install-recompute" (arg: (version, transfer seconds))."""

    stream: Stream
    roots: int
    calls: tuple[tuple[float, str, Any], ...] = ()


def random_script(seed: int, stream: Stream, roots: int, horizon: float, calls: int = 24,
                  grid: float = 0.0) -> Script:
    """`calls` calls at uniform instants in [0, horizon] (on a grid of `grid` seconds if
    set, so they tie with segment ends), a resume after them; an abort names 1-16 of the
    stream's groups (some in flight, some not), a transfer takes up to horizon / 20."""
    rng = np.random.default_rng(seed)
    n = len(stream.submit_t)
    times = np.sort(rng.uniform(0, horizon, calls))
    if grid:
        times = np.round(times / grid) * grid
    out: list[tuple[float, str, Any]] = []
    version = 0
    weights = np.array([3, 1, 1, 1, 4, 2, 2], dtype=float)
    for t, op in zip(times.tolist(), rng.choice(OPS, calls, p=weights / weights.sum()),
                     strict=True):
        if op == "abort":
            picked = rng.choice(n, int(rng.integers(1, 17)), replace=False)
            out.append((t, op, tuple(f"{g}.0" for g in picked.tolist())))
        elif op.startswith("install"):
            version += 1
            out.append((t, str(op), (version, float(rng.uniform(0, horizon / 20)))))
        else:
            out.append((t, str(op), None))
    out.append((horizon * 1.01, "resume", None))
    return Script(stream, roots, tuple(out))


def run_script(script: Script, decode: DecodeModel | TableDecodeModel, kv: int,
               max_running: int, compiled: bool, room: int = 64, pools: list[Any] | None = None,
               ) -> tuple[list[Row], list[tuple[Any, ...]]]:
    """The script on `SimEngine`s behind an `EnginePool`, or on `PinnedPool`: the engine
    events in emission order, and the log (t, heap seq, engine events so far, what).
    The collector is off meanwhile, as `SimRuntime` runs (harness/sim/runtime.py).
    `pools`: the pool is appended to it (a test reads the core after the run)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _run(script, decode, kv, max_running, compiled, room, pools)
    finally:
        if collecting:
            gc.enable()


def _run(script: Script, decode: DecodeModel | TableDecodeModel, kv: int, max_running: int,
         compiled: bool, room: int, pools: list[Any] | None,
         ) -> tuple[list[Row], list[tuple[Any, ...]]]:
    heap = Heap()
    driver = Driver(heap)
    s = script.stream
    n, roots, engines = len(s.submit_t), script.roots, s.engines
    targets = s.target.tolist()

    def target_of(r: Request) -> int:
        return targets[r.group]

    pool: Any
    if compiled:
        from harness.sim.fastcore.timeline import G_NE

        pool = PinnedPool(heap, decode, kv, max_running, engines, target_of, room)

        def count() -> int:
            return int(pool.core.g[G_NE])
    else:
        rec = Recorder(heap)
        sims = [SimEngine(heap, decode, kv, max_running, rec, target_of, index=e)
                for e in range(engines)]
        pool = EnginePool(sims, _no_make, engines, 1, rec)

        def count() -> int:
            return len(rec.rows)
    if pools is not None:
        pools.append(pool)
    log: list[tuple[Any, ...]] = []

    def note(*what: Any) -> None:
        log.append((heap.now, heap._seq, count(), *what))  # noqa: SLF001

    reqs = [Request(0, i, 0, Prompt(i, p), max_tokens=t + 5 * (i % 2), priority=q, replica=e)
            for i, (p, t, q, e) in enumerate(zip(s.prompt.tolist(), targets,
                                                 s.priority.tolist(), s.engine.tolist(),
                                                 strict=True))]

    def done(resp: Response) -> None:
        req = resp.request
        note("return", req.group, resp.status, resp.tokens, resp.version_spans,
             resp.truncated)
        if resp.status == "aborted" and (resp.tokens > 0 or req.group % 3):
            again = replace(req.continued(resp),
                            replica=(req.replica + req.group % 2) % engines)
            pool.submit_then(again, done)
        elif req.group + roots < n:
            pool.submit_then(reqs[req.group + roots], done)

    async def call(op: str, arg: Any) -> None:
        if op == "abort":
            out = await pool.abort(arg)
            note(op, [(r.request.id, r.tokens, r.status, r.version_spans) for r in out])
        elif op.startswith("install"):
            await pool.install(arg[0], arg[1], True, op == "install-recompute")
            note(op, arg[0])
        elif op == "resume":
            await pool.resume()
            note(op)
        else:
            await pool.pause({"abort-all": "abort"}.get(op, op))
            note(op)

    times = s.submit_t.tolist()
    for i in sorted(range(min(roots, n)), key=lambda i: (times[i], i)):
        heap.call_at(times[i], pool.submit_then, reqs[i], done)
    for t, op, arg in script.calls:
        heap.call_at(t, _spawn, driver, call(op, arg))
    heap.run()
    if driver.failure is not None:
        raise driver.failure
    return (core_rows(pool) if compiled else rec.rows), log


def _spawn(driver: Driver, coro: Coroutine[Any, Any, None]) -> None:
    driver.spawn(coro)


def _no_make(index: int, tp: int, version: int) -> SimEngine:
    raise RuntimeError("a script's pool builds no replica")
