"""Engine replicas behind a router, and colocated GPUs shared with the trainer.

`EnginePool` gives a system one `Engine` however many replicas serve it: a
request goes to the replica with the fewest outstanding requests (ties to the
lowest index); pause, resume and new weights reach every replica.

`GpuShare` is the colocated placement: engine and trainer take turns on the
same GPUs. The trainer gets them only when every replica is idle, the engine
gets them back when it has work and the trainer is between calls; each
hand-over costs `switch_s` (offloading one side, loading the other) and is
recorded as a `placement_switch` event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from harness.runtime import EngineLoad, PauseMode, Request, Response
from harness.sim.engine import SimEngine


class EnginePool:
    """Implements `harness.runtime.Engine` over several `SimEngine` replicas."""

    def __init__(self, engines: list[SimEngine]) -> None:
        self.engines = engines
        self._where: dict[str, SimEngine] = {}
        self._outstanding = [0] * len(engines)  # submitted and not yet returned, per replica

    @property
    def version(self) -> int:
        return self.engines[0].version

    @property
    def replicas(self) -> int:
        return len(self.engines)

    @property
    def preemptions(self) -> int:
        return sum(e.preemptions for e in self.engines)

    def submit(self, request: Request) -> asyncio.Future[Response]:
        counts = self._outstanding
        index = min(range(len(counts)), key=counts.__getitem__)  # ties: lowest index
        engine = self.engines[index]
        counts[index] += 1
        self._where[request.id] = engine
        future = engine.submit(request)
        future.add_done_callback(lambda _f, rid=request.id, i=index: self._returned(rid, i))
        return future

    def _returned(self, request_id: str, index: int) -> None:
        self._where.pop(request_id, None)
        self._outstanding[index] -= 1

    async def abort(self, request_ids: Iterable[str]) -> list[Response]:
        by_engine: dict[int, list[str]] = {}
        for rid in request_ids:
            engine = self._where.get(rid)
            if engine is not None:
                by_engine.setdefault(engine.index, []).append(rid)
        out: list[Response] = []
        for index in sorted(by_engine):
            out += await self.engines[index].abort(by_engine[index])
        return out

    async def pause(self, mode: PauseMode = "keep") -> None:
        for engine in self.engines:
            await engine.pause(mode)

    async def resume(self) -> None:
        for engine in self.engines:
            await engine.resume()

    def load(self) -> EngineLoad:
        loads = [e.load() for e in self.engines]
        return EngineLoad(sum(x.running for x in loads), sum(x.waiting for x in loads),
                          sum(x.kv_used for x in loads) / len(loads))

    async def install(self, version: int, transfer_s: float, in_flight: bool) -> None:
        tasks = [asyncio.ensure_future(e.install(version, transfer_s, in_flight))
                 for e in self.engines]
        for task in tasks:
            await task


class GpuShare:
    """Colocated engine and trainer: one owner of the GPUs at a time."""

    def __init__(self, switch_s: float, emit: Callable[..., Any]) -> None:
        self.owner = "engine"
        self.switch_s = switch_s
        self.switches = 0
        self._emit = emit
        self._engines: list[SimEngine] = []
        self._trainer_lock: asyncio.Lock | None = None
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._to_engine: asyncio.Task[None] | None = None

    def attach(self, engines: list[SimEngine], trainer_lock: asyncio.Lock) -> None:
        self._engines = engines
        self._trainer_lock = trainer_lock

    def engine_holds(self) -> bool:
        return self.owner == "engine"

    def engine_idle(self) -> None:
        if all(e.idle() for e in self._engines):
            waiters, self._idle_waiters = self._idle_waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def engine_wants(self) -> None:
        if self.owner == "trainer" and self._to_engine is None:
            self._to_engine = asyncio.ensure_future(self._switch_to_engine())

    async def trainer_acquire(self) -> None:
        """Called by the trainer, holding its lock, before it computes."""
        while self.owner != "trainer":
            if all(e.idle() for e in self._engines):
                await self._switch("trainer")
            else:
                waiter = asyncio.get_running_loop().create_future()
                self._idle_waiters.append(waiter)
                await waiter

    async def _switch(self, to: str) -> None:
        self.owner = "switching"
        self._emit("placement_switch", to=to)
        await asyncio.sleep(self.switch_s)
        self.switches += 1
        self.owner = to

    async def _switch_to_engine(self) -> None:
        assert self._trainer_lock is not None
        async with self._trainer_lock:  # wait for the trainer's current call to end
            await self._switch("engine")
        self._to_engine = None
        for engine in self._engines:
            engine.wake()
