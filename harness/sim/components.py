"""The simulated verifier and trainer.

The verifier sleeps for the prompt's drawn latency and returns its drawn
reward. The trainer spends roofline time per micro-batch (`perf.TrainModel`),
steps the optimizer, and publishes weights to the engine after a transfer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from harness.core.offpolicy import lag_histogram, step_stats
from harness.core.runtime import Group, Response
from harness.sim.perf import TrainModel
from workloads.replay import hidden_score


class SimVerifier:
    """Reward workers: `workers` checks at a time (0: no limit). A check that runs
    past `timeout` is stopped there and scores zero, as a sandbox would."""

    def __init__(self, workers: int = 0) -> None:
        self._slots = asyncio.Semaphore(workers) if workers > 0 else None

    async def score(self, response: Response, timeout: float | None = None) -> float:
        if self._slots is None:
            return await hidden_score(response, timeout)
        async with self._slots:
            return await hidden_score(response, timeout)


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
        share: Any = None,
        gpus: int = 1,
    ) -> None:
        self._share = share
        self.gpus = gpus
        self._model = model
        self._engine = engine
        self._emit = emit
        self._micro_tokens = micro_batch_tokens
        self._sync_s = weight_sync_s
        self.lock = asyncio.Lock()
        self.version = 0
        self._step = 0
        self._drift = drift
        self._clamp = clamp
        self._lags: dict[int, int] = {}  # lag -> tokens accumulated since the last step

    def micro_batches(self, groups: Sequence[Group]) -> list[list[int]]:
        """Pack sample lengths into micro-batches under the token budget (first
        fit in order; a sample longer than the budget forms its own)."""
        batches: list[list[int]] = [[]]
        used = 0
        for group in groups:
            for resp in group.responses:
                n = group.prompt.tokens + resp.tokens
                if batches[-1] and used + n > self._micro_tokens:
                    batches.append([])
                    used = 0
                batches[-1].append(n)
                used += n
        return [b for b in batches if b]

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
            micros = self.micro_batches(groups)
            for group in groups:
                for resp in group.responses:
                    for lag, n in lag_histogram(resp.version_spans, self.version).items():
                        self._lags[lag] = self._lags.get(lag, 0) + n
            self._emit("train_start", batch=batch, micro_batches=len(micros),
                       samples=sum(map(len, micros)), gpus=gpus or self.gpus)
            await asyncio.sleep(slowdown * sum(model.micro_time(m) for m in micros))
            self._emit("train_end", batch=batch, tokens=sum(map(sum, micros)))

    async def step(self) -> int:
        async with self.lock:
            if self._share is not None:
                await self._share.trainer_acquire()
            await asyncio.sleep(self._model.optimizer_s)
            self._step += 1
            stats = step_stats(self._lags, self._drift, self._clamp)
            self._lags = {}
            self.version += 1
            self._emit("optimizer_step", step=self._step, version=self.version, **stats)
            return self.version

    async def publish(self, in_flight: bool = False, recompute: bool = False) -> None:
        version = self.version
        await self._engine.install(version, self._sync_s, in_flight, recompute)
        said = {"recompute": True} if recompute else {}  # traces without it stay as they were
        self._emit("weights_published", version=version, in_flight=in_flight, **said)
