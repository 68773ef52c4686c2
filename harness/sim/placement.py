"""Engine replicas behind a router, and colocated GPUs shared with the trainer.

`EnginePool` gives a system one `Engine` however many replicas serve it: a
request goes to the replica with the fewest outstanding requests (ties to the
lowest index), or as the framework's dispatch says (harness/sim/dispatch.py:
verl's static split); pause, resume and new weights reach every replica.

`GpuShare` is the colocated placement: engine and trainer take turns on the
same GPUs. The trainer gets them only when every replica is idle (it never
preempts a running request), possibly mid-rollout, between two requests.
While the trainer has or is taking the GPUs, generation is paused: new
requests wait in the engine. When the trainer's call (train or step) ends and
requests are waiting, the GPUs go back to the engine before the trainer's
next call. Each hand-over costs `switch_s` (offloading one side, loading the
other) and is recorded as a `placement_switch` event.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from harness.core.runtime import EngineLoad, PauseMode, Request, Response
from harness.sim.co import Driver, Wait, sleep
from harness.sim.engine import SimEngine
from harness.sim.hybrid import Lender
from harness.sim.replica_windows import Marks, engine_marks
from harness.sim.waits import Slots


class LeastLoaded:
    """Which replica takes the next request: the one with the fewest outstanding among
    the first `active` (ties: the lowest index), found in a heap of (count, index), not by
    a scan (a pool of 128 replicas routes 32,768 requests). An entry whose count has
    since changed is dropped when it comes to the top; every replica always has its
    current one."""

    def __init__(self, replicas: int) -> None:
        self.counts = [0] * replicas  # submitted and not yet returned, per replica
        self._active = replicas
        self._heap = [(0, i) for i in range(replicas)]  # sorted: a heap already

    @property
    def active(self) -> int:
        return self._active

    @active.setter
    def active(self, replicas: int) -> None:
        self._active = replicas
        self._rebuild()

    def take(self, request: Request | None = None) -> int:
        """The replica for the next request (this router does not look at it)."""
        counts, heap = self.counts, self._heap
        if self._active == 1:
            counts[0] += 1
            return 0
        while True:
            count, index = heap[0]
            if count == counts[index] and index < self._active:
                break
            heapq.heappop(heap)
        counts[index] = count + 1
        heapq.heapreplace(heap, (count + 1, index))
        return index

    def take_many(self, requests: list[Request]) -> list[int]:
        """`take` of each request in turn (none pinned): a group's samples at once."""
        take = self.take
        return [take(request) for request in requests]

    def pin(self, index: int) -> int:
        """`take` for a request that names its replica (`Request.replica`)."""
        self.counts[index] += 1
        if self._active != 1:
            heapq.heappush(self._heap, (self.counts[index], index))
        return index

    def give_back(self, index: int) -> None:
        counts = self.counts
        count = counts[index] = counts[index] - 1
        if self._active == 1:  # `take` reads no heap then; the `active` setter rebuilds it
            return
        heap = self._heap
        heapq.heappush(heap, (count, index))
        if len(heap) > 4 * len(counts) + 64:  # stale entries: start afresh
            self._rebuild()

    def _rebuild(self) -> None:
        self._heap = [(c, i) for i, c in enumerate(self.counts[: self._active])]
        heapq.heapify(self._heap)


class EnginePool:
    """Implements `harness.core.runtime.Engine` over several `SimEngine` replicas.

    The pool hands out its own Waits, chained to the replica's, so that a
    request can move between replicas (`resize`) without the system noticing.
    `make(index, tp, version)` builds a replica; the pool owns `gpus` GPUs.
    """

    def __init__(self, engines: list[SimEngine], make: Callable[[int, int, int], SimEngine],
                 gpus: int, tp: int, emit: Callable[..., Any], share: Any = None,
                 max_len: int = 0, route: Callable[[int], LeastLoaded] = LeastLoaded) -> None:
        self.engines = engines
        self.max_len = max_len  # the run's longest sequence, as an engine's context length
        self.tp = tp
        self._make = make
        self._gpus = gpus
        self._emit = emit
        self._share = share
        self._live: dict[str, tuple[Request, Callable[[Response], Any], int]] = {}
        self._moving: set[str] = set()
        self._route = route  # builds the router of n replicas (harness/sim/dispatch.py)
        self._router = route(len(engines))
        self._retired_preemptions = 0
        self.lender: Any = None  # a Lender, or what builds one (the runtime's; None: none)
        self._lent = False
        self._standing = len(engines)  # replicas on the engine's own GPUs
        self._heap = engines[0].loop
        self._soon, self._back = self._heap.call_soon, self._returned  # bound once
        self.relay: tuple[int, float] | None = None  # the relay tier's (version, transfer_s)

    @property
    def version(self) -> int:
        return self.engines[0].version

    @property
    def replicas(self) -> int:
        return self._router.active  # replicas taking requests; the rest were released

    @property
    def preemptions(self) -> int:
        return self._retired_preemptions + sum(e.preemptions for e in self.engines)

    def replica_marks(self) -> Marks:
        """The first admission and each replica's last finish since the last call, then
        cleared (harness/sim/replica_windows.py)."""
        return engine_marks(self.engines)

    def submit(self, request: Request) -> Wait:
        outer = Wait()
        self.submit_then(request, partial(_deliver, outer))
        return outer

    def submit_then(self, request: Request, done: Callable[[Response], Any]) -> None:
        """`submit`, calling `done(response)` a turn after the request ends, with no Wait
        (a group served by callbacks: harness/sim/serve.py)."""
        pinned = request.replica
        router = self._router
        index = router.pin(pinned) if 0 <= pinned < router.active else router.take(request)
        rid = request.id
        self._live[rid] = (request, done, index)
        # Called as the replica ends the request: `_returned` is scheduled then, as the
        # callback of a Wait the replica returned would be.
        self.engines[index].submit_then(request, partial(self._soon, self._back, rid), rid)

    def submit_many(self, requests: list[Request], done: Callable[[Response], Any]) -> None:
        """`submit_then` of each in turn (a group's samples: harness/sim/serve.py)."""
        for request in requests:
            self.submit_then(request, done)

    def _returned(self, request_id: str, response: Response) -> None:
        request, done, index = self._live.pop(request_id)
        self._router.give_back(index)
        if self._moving and request_id in self._moving and response.status == "aborted":
            self._moving.discard(request_id)  # a migration: continue on another replica
            self.submit_then(request.continued(response), done)
        else:
            done(response)

    async def abort(self, request_ids: Iterable[str]) -> list[Response]:
        return self.abort_now(request_ids)

    def abort_now(self, request_ids: Iterable[str]) -> list[Response]:
        """`abort` as a plain call: no replica waits to abort."""
        by_engine: dict[int, list[str]] = {}
        for rid in request_ids:
            if rid in self._live:
                by_engine.setdefault(self._live[rid][2], []).append(rid)
        out: list[Response] = []
        for index in sorted(by_engine):
            out += self.engines[index].abort_now(by_engine[index])
        return out

    async def pause(self, mode: PauseMode = "keep") -> None:
        if mode == "drain":  # one replica after another, each until it is empty
            for engine in self.engines:
                await engine.pause(mode)
        else:  # no replica waits: plain calls, not a coroutine each
            for engine in self.engines:
                engine.pause_now(mode)

    async def resume(self) -> None:
        for engine in self.engines:
            engine.resume_now()

    def load(self) -> EngineLoad:
        loads = [e.load() for e in self.engines[: self._router.active]]
        return EngineLoad(sum(x.running for x in loads), sum(x.waiting for x in loads),
                          sum(x.kv_used for x in loads) / len(loads), self.preemptions, self.tp,
                          self._gpus, sum(x.kv_tokens for x in loads), self.max_len,
                          sum(1 for x in loads if x.running == 0 and x.waiting == 0))

    async def install(self, version: int, transfer_s: float, in_flight: bool,
                      recompute: bool = False, drafter: int | None = None) -> None:
        """Every replica at once: each pauses, one transfer, each takes the weights (and
        the drafter's, `drafter`: the policy version it matches; None: none sent)."""
        paused = [e.install_begin() for e in self.engines]
        await sleep(self._heap, transfer_s)
        for engine, was_paused in zip(self.engines, paused, strict=True):
            engine.install_end(version, was_paused, recompute, drafter)

    async def pull(self, replica: int) -> int:
        """That replica alone takes the relay's newest weights (`Trainer.publish(relay=
        True)` left them there with the weight-sync model's transfer time)."""
        engine = self.engines[replica]
        if self.relay is not None and self.relay[0] > engine.version:
            await engine.install(self.relay[0], self.relay[1], in_flight=False)
        return engine.version

    async def resize(self, replicas: int) -> int:
        """Keep the first `replicas` replicas (0: all of them); move the others'
        requests onto them (aborted there, resumed here with their tokens: the KV
        cache is recomputed). Returns the GPUs released."""
        replicas = replicas or len(self.engines)
        if not 1 <= replicas <= len(self.engines):
            raise ValueError(f"resize: {replicas} replicas of {len(self.engines)}")
        leaving = [rid for rid, (_, _, i) in self._live.items() if i >= replicas]
        self._router.active = replicas
        self._emit("engine_resize", replicas=replicas, moved=len(leaving))
        await self._move(leaving)
        return (len(self.engines) - replicas) * self.tp

    async def _move(self, request_ids: list[str]) -> None:
        """Abort these requests where they run; each goes on from its tokens on the
        replica the router then picks (`_returned`)."""
        self._moving.update(request_ids)
        by_engine: dict[int, list[str]] = {}
        for rid in request_ids:
            by_engine.setdefault(self._live[rid][2], []).append(rid)
        for index in sorted(by_engine):
            await self.engines[index].abort(by_engine[index])

    async def lend(self, memory_fraction: float, rebalance: bool = False) -> int:
        """Replicas on the trainer's GPUs join the router (harness/sim/hybrid.py): the
        trainer's lock is held until `reclaim`, the GPUs are handed over and the weights
        sent, then the replicas (built at the first lend, asleep between lends) take
        requests; `rebalance` moves every request in flight, least-loaded."""
        lender = self._lender_now()
        if lender is None or self._lent or lender.replicas < 1:
            return 0
        await lender.lock.acquire()
        self._lent = True
        standing = self._standing
        await sleep(self._heap, lender.cost.handover_s + lender.cost.sync_s)
        if len(self.engines) == standing:
            self.engines += [lender.make(standing + i, self.version, memory_fraction)
                             for i in range(lender.replicas)]
            old, self._router = self._router, self._route(len(self.engines))
            self._router.counts[:standing] = old.counts
        for engine in self.engines[standing:]:
            engine.version = self.version
        self._router.active = len(self.engines)
        moved = list(self._live) if rebalance else []
        self._emit("engine_resize", replicas=len(self.engines), moved=len(moved),
                   lent=lender.replicas)
        await self._move(moved)
        return lender.replicas

    async def reclaim(self) -> int:
        """The lent replicas leave the router, their requests go on from their tokens on
        the standing ones, they sleep (one hand-over) and the trainer's lock is freed."""
        lender = self._lender_now()
        if lender is None or not self._lent:
            return 0
        standing = self._standing
        leaving = [rid for rid, (_, _, i) in self._live.items() if i >= standing]
        self._router.active = standing
        self._emit("engine_resize", replicas=standing, moved=len(leaving))
        await self._move(leaving)
        await sleep(self._heap, lender.cost.handover_s)
        self._lent = False
        lender.lock.release()
        return len(leaving)

    def _lender_now(self) -> Any:
        """The runtime's `Lender`, built at the first ask (None: this runtime lends none)."""
        if callable(self.lender) and not isinstance(self.lender, Lender):
            self.lender = self.lender()
        return self.lender

    async def reconfigure(self, tp: int) -> None:
        """New replicas of tensor-parallel size `tp` over the same GPUs (idle only)."""
        if self._live:
            raise RuntimeError("reconfigure: the engine must be idle")
        if tp < 1 or self._gpus % tp:
            raise ValueError(f"reconfigure: tp={tp} does not divide {self._gpus} GPUs")
        self._retired_preemptions = self.preemptions
        version = self.version
        self.tp = tp
        self.engines = [self._make(i, tp, version) for i in range(self._gpus // tp)]
        self._standing = len(self.engines)
        self._router = self._route(len(self.engines))
        if self._share is not None:
            self._share.engines = self.engines
        self._emit("engine_reconfigure", tp=tp, replicas=len(self.engines))


def _deliver(wait: Wait, response: Response) -> None:
    """A response to whoever awaits it (nobody, when they cancelled the wait)."""
    if not wait.done():
        wait.set_result(response)


class GpuShare:
    """Colocated engine and trainer: one owner of the GPUs at a time."""

    def __init__(self, switch_s: float, emit: Callable[..., Any], driver: Driver) -> None:
        self.owner = "engine"
        self.switch_s = switch_s
        self.switches = 0
        self._emit = emit
        self._driver = driver  # the switch back to the engine runs on its own
        self.engines: list[SimEngine] = []
        self._trainer_lock: Slots | None = None
        self._idle_waiters: list[Wait] = []
        self._to_engine: Wait | None = None

    def attach(self, engines: list[SimEngine], trainer_lock: Slots) -> None:
        self.engines = engines
        self._trainer_lock = trainer_lock

    def engine_holds(self) -> bool:
        return self.owner == "engine"

    def engine_idle(self) -> None:
        if all(e.idle() for e in self.engines):
            waiters, self._idle_waiters = self._idle_waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def engine_wants(self) -> None:
        """The engine has requests but not the GPUs: they come back once the
        trainer's current call ends. Also while the trainer is still taking
        them ("switching"): a request submitted then must not be forgotten, or
        the GPUs stay with the trainer and the run deadlocks."""
        if self.owner != "engine" and self._to_engine is None:
            self._to_engine = self._driver.spawn(self._switch_to_engine())

    async def trainer_acquire(self) -> None:
        """Called by the trainer, holding its lock, before it computes."""
        while self.owner != "trainer":
            if all(e.idle() for e in self.engines):
                await self._switch("trainer")
            else:
                waiter = Wait()
                self._idle_waiters.append(waiter)
                await waiter

    async def _switch(self, to: str) -> None:
        self.owner = "switching"
        self._emit("placement_switch", to=to)
        await self._driver.sleep(self.switch_s)
        self.switches += 1
        self.owner = to

    async def _switch_to_engine(self) -> None:
        assert self._trainer_lock is not None
        async with self._trainer_lock:  # wait for the trainer's current call to end
            if self.owner != "engine" and not all(e.idle() for e in self.engines):
                await self._switch("engine")  # else the requests went (aborted)
        self._to_engine = None
        for engine in self.engines:
            engine.wake()
