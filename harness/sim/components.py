"""The simulated verifier and trainer.

The verifier sleeps for the prompt's drawn latency and returns its drawn
reward. The trainer spends roofline time per micro-batch (`perf.TrainModel`),
steps the optimizer, and publishes weights to the engine after a transfer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from harness.core.offpolicy import add_lags, step_stats
from harness.core.runtime import Group, Response
from harness.sim.co import Driver, Wait
from harness.sim.heap import Entry, Heap, cancel
from harness.sim.perf import TrainModel
from harness.sim.trainer.pricer import charge
from harness.sim.waits import Slots, gather
from workloads.replay import check_outcome


class _Check(Wait):
    """One check under way: done after its latency with its reward; cancelled (a
    system gave up on it), it records how long it ran, as a live check's would."""

    __slots__ = ("response", "start", "took", "reward", "entry", "heap")

    def __init__(self, heap: Heap, response: Response, timeout: float | None) -> None:
        super().__init__()
        self.heap, self.response, self.start = heap, response, heap.now
        self.took, self.reward = check_outcome(response, timeout)
        self.entry: Entry | None = heap.call_later(self.took, self._done)

    def _done(self) -> None:
        self.entry = None  # it holds this check: a cycle, with the collector off
        self.response.verify_s = self.took
        self.set_result(self.reward)

    def cancel(self) -> bool:
        if self.done():
            return False
        cancel(self.entry)
        self.entry = None
        self.response.verify_s = self.heap.now - self.start
        return super().cancel()


class _GroupCheck(Wait):
    """Several checks started at once, none waiting for a worker (a reward stage's
    group): done with their rewards, in order, at the last one's end. One heap entry
    rather than one a check, where that last check's would be: at the latest end, its
    seq taken before anything scheduled after these checks, so it runs in the same order
    against every other entry (the other checks' ends change nothing anyone reads before
    the last: each sets only its response's `verify_s`, set here with the others).
    Cancelled, each check ends as `_Check` does: the one done its time, the others how
    long they ran."""

    __slots__ = ("heap", "responses", "start", "took", "rewards", "entry")

    def __init__(self, heap: Heap, responses: Sequence[Response]) -> None:
        super().__init__()
        self.heap, self.responses, self.start = heap, responses, heap.now
        outcomes = [check_outcome(response, None) for response in responses]
        self.took = [took for took, _ in outcomes]
        self.rewards = [reward for _, reward in outcomes]
        self.entry: Entry | None = heap.call_later(max(self.took), self._done)

    def _done(self) -> None:
        self.entry = None
        for response, took in zip(self.responses, self.took, strict=True):
            response.verify_s = took
        self.set_result(self.rewards)

    def cancel(self) -> bool:
        if self.done():
            return False
        cancel(self.entry)
        self.entry = None
        ran = self.heap.now - self.start
        for response, took in zip(self.responses, self.took, strict=True):
            response.verify_s = took if took <= ran else ran
        return super().cancel()


class _Queued(Wait):
    """A check that first waits for one of the reward workers: the step for step twin
    of the coroutine `async with slots: return await _Check(...)` spawned on the driver
    (what it was), each of its turns a heap entry, so traces are byte for byte the same
    without a coroutine a check. Cancelled, it ends as that coroutine would: a turn
    later, its check cancelled and its worker given back (none taken before its first
    turn or while it waits for one)."""

    __slots__ = ("heap", "slots", "response", "timeout", "on", "asked")

    def __init__(self, heap: Heap, slots: Slots, response: Response,
                 timeout: float | None) -> None:
        super().__init__()
        self.heap, self.slots, self.response, self.timeout = heap, slots, response, timeout
        self.on: Wait | None = None  # the worker's Wait, then the check
        self.asked = False  # cancel() was called
        heap.call_soon(self._begin)  # a spawned coroutine's first step

    def _begin(self) -> None:
        if self.asked:  # cancelled before its first step: no worker taken
            Wait.cancel(self)
            return
        worker = self.slots.acquire()
        if worker.done():
            self._start()
        else:
            self.on = worker
            worker.add_done_callback(self._turn)

    def _start(self) -> None:
        check = self.on = _Check(self.heap, self.response, self.timeout)
        check.add_done_callback(self._turn)

    def _turn(self, _: Wait) -> None:
        self.heap.call_soon(self._resume)

    def _resume(self) -> None:
        on, self.on = self.on, None
        if not isinstance(on, _Check):  # the worker's Wait
            if self.asked:
                Wait.cancel(self)  # `async with` never entered: no release
            else:
                self._start()
            return
        self.slots.release()
        if self.asked:
            Wait.cancel(self)
        else:
            self.set_result(on.result())

    def cancel(self) -> bool:
        if self.done():
            return False
        self.asked = True
        if self.on is not None:
            self.on.cancel()
        return True


class SimVerifier:
    """Reward workers: `workers` checks at a time (0: no limit). A check that runs
    past `timeout` is stopped there and scores zero, as a sandbox would. A check is a
    timer on the heap, not a coroutine: every response is checked."""

    def __init__(self, driver: Driver, workers: int = 0) -> None:
        self._driver, self._heap = driver, driver.heap
        self._slots = Slots(workers) if workers > 0 else None
        # A check is `_Check`'s timer alone where no worker is waited for: `serve` may
        # then draw it and set its timer itself, without a Wait (harness/sim/serve.py).
        self.timers = self._slots is None

    def score(self, response: Response, timeout: float | None = None) -> Wait:
        """A Wait for the reward (a system may await it, spawn it, or cancel it)."""
        if self._slots is None:
            return _Check(self._heap, response, timeout)
        return _Queued(self._heap, self._slots, response, timeout)

    def score_all(self, responses: Sequence[Response]) -> Wait:
        """A Wait for the rewards of `responses`, checked at once, in order: `score` of
        each gathered, as one timer where no worker is waited for (`_GroupCheck`)."""
        if self._slots is not None or not responses:
            return gather(self._driver, *(self.score(response) for response in responses))
        return _GroupCheck(self._heap, responses)


class SimTrainer:
    """One trainer pool: its train spans never overlap (a lock serialises them)."""

    def __init__(
        self,
        model: TrainModel,
        engine: Any,
        emit: Callable[..., Any],
        micro_batch_tokens: int,
        weight_sync_s: float,
        drift: float = 0.0,
        clamp: float = 5.0,
        *,
        driver: Driver,
        share: Any = None,
        gpus: int = 1,
    ) -> None:
        self._sleep = driver.sleep
        self._share = share
        self.gpus = gpus
        self._model = model
        self._engine = engine
        self._emit = emit
        self._micro_tokens = micro_batch_tokens
        self._sync_s = weight_sync_s
        self.lock = Slots(1)
        self.version = 0
        self._step = 0
        self._drift = drift
        self._clamp = clamp
        self._lags: dict[int, int] = {}  # lag -> tokens accumulated since the last step

    async def train(self, batch: int, groups: Sequence[Group], gpus: int | None = None) -> None:
        """`gpus` below the pool's size: compute on that many GPUs only, GPUs the
        engine has released mid-rollout (RollPacker's stream trainer), without
        taking the colocated GPUs from the engine."""
        partial = gpus is not None and gpus < self.gpus
        async with self.lock:
            if self._share is not None and not partial:
                await self._share.trainer_acquire()
            model, slowdown = self._model, self.gpus / gpus if partial and gpus else 1.0
            fewer = self._model.on_gpus(gpus) if partial and gpus and hasattr(
                self._model, "on_gpus") else None
            if fewer is not None:  # the kernel trainer spreads over the GPUs it has
                model, slowdown = fewer, 1.0
            micros, samples, tokens, seconds = charge(model, groups, self._micro_tokens)
            add_lags(self._lags, groups, self.version)
            self._emit("train_start", batch=batch, micro_batches=micros, samples=samples,
                       gpus=gpus or self.gpus)
            await self._sleep(slowdown * seconds)
            self._emit("train_end", batch=batch, tokens=tokens)

    async def step(self) -> int:
        async with self.lock:
            if self._share is not None:
                await self._share.trainer_acquire()
            await self._sleep(self._model.optimizer_s)
            self._step += 1
            stats = step_stats(self._lags, self._drift, self._clamp)
            self._lags = {}
            self.version += 1
            self._emit("optimizer_step", step=self._step, version=self.version, **stats)
            return self.version

    async def publish(self, in_flight: bool = False, recompute: bool = False,
                      drafter: int | None = None, relay: bool = False) -> None:
        version = self.version
        if relay:  # to the relay tier: no replica changes, the trainer does not wait
            self._engine.relay = (version, self._sync_s)
            self._emit("weights_published", version=version, in_flight=True, relay=True)
            return
        # `drafter`: a system's own drafter, sent with the weights (TLT); None: none
        await self._engine.install(version, self._sync_s, in_flight, recompute, drafter)
        said: dict[str, Any] = {"recompute": True} if recompute else {}  # else as before
        if drafter is not None:
            said["drafter"] = drafter
        self._emit("weights_published", version=version, in_flight=in_flight, **said)
