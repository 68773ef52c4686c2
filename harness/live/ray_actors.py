"""The rollout and trainer nodes of the live runtime as Ray actors, and Ray itself.

- `EngineActor` (rollout node) holds the vLLM engine. A request is one
  streaming call that yields "admit" at its first token and then the whole
  generation, so the control node sees admission as it happens without a Ray
  object per token.
- `TrainerActor` (trainer node) holds the learner; weights travel to the
  engine as safetensors bytes through Ray's object store, so the two may sit
  on different nodes.

The control node that runs a system on them is `harness.live.on_ray`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from harness.core.config import RunConfig
from harness.live.engine import Generation, Sampling


class EngineActor:
    """The rollout node: a `VLLMLocalBackend` behind actor calls."""

    def __init__(self, model_dir: str, max_model_len: int, kv_cache_mb: int, seed: int) -> None:
        from harness.live.logs import route_from_env
        from harness.live.vllm_local import VLLMLocalBackend

        route_from_env()  # vLLM's lines to the run's engine.log

        self.backend = VLLMLocalBackend.start(model_dir, max_model_len, kv_cache_mb, seed)

    async def warm_up(self, prompt_ids: list[int]) -> None:
        await self.backend.warm_up(prompt_ids)

    async def generate(self, s: Sampling, gen: Generation) -> Any:
        """Streaming: yields 'admit' (if any token came) and then the Generation."""
        admitted = asyncio.Event()
        task = asyncio.ensure_future(self.backend.generate(s, gen, admitted.set))
        first = asyncio.ensure_future(admitted.wait())
        await asyncio.wait([task, first], return_when=asyncio.FIRST_COMPLETED)
        first.cancel()
        if admitted.is_set():
            yield "admit"
        yield await task

    async def abort(self, request_ids: list[str]) -> None:
        await self.backend.abort(request_ids)

    async def pause(self, mode: str) -> None:
        await self.backend.pause(mode)

    async def resume(self) -> None:
        await self.backend.resume()

    async def install(self, version: int, weights: str | bytes, recompute: bool = False) -> int:
        await self.backend.install(version, weights, recompute=recompute)
        return self.backend.version

    async def shutdown(self) -> None:
        await self.backend.shutdown()

    def pids(self) -> list[int]:
        import os

        return [os.getpid(), *self.backend.engine_pids()]


class RayEngineBackend:
    """An `EngineBackend` that forwards to an `EngineActor`."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self.version = 0

    async def warm_up(self, prompt_ids: list[int]) -> None:
        await self.actor.warm_up.remote(prompt_ids)

    async def generate(self, s: Sampling, gen: Generation,
                       on_admit: Callable[[], None]) -> Generation:
        stream = self.actor.generate.options(num_returns="streaming").remote(s, gen)
        result = gen
        async for ref in stream:
            item = await ref
            if isinstance(item, str):
                on_admit()
            else:
                result = item
        return result

    async def abort(self, request_ids: list[str]) -> None:
        await self.actor.abort.remote(request_ids)

    async def pause(self, mode: str) -> None:
        await self.actor.pause.remote(mode)

    async def resume(self) -> None:
        await self.actor.resume.remote()

    async def install(self, version: int, weights: str | bytes, recompute: bool = False) -> None:
        self.version = await self.actor.install.remote(version, weights, recompute)

    async def shutdown(self) -> None:
        import ray

        try:
            await asyncio.wait_for(self.actor.shutdown.remote(), 30)
        except Exception:  # already dead or stuck: killing it below is enough
            pass
        ray.kill(self.actor)


class TrainerActor:
    """The trainer node: the learner (`GRPOLearner` or Megatron's) behind actor calls."""

    def __init__(self, cfg: RunConfig) -> None:
        from harness.live.learner import make_learner
        from harness.live.logs import route_from_env

        route_from_env()

        self.learner = make_learner(cfg)

    def call(self, method: str, *args: Any) -> Any:
        return getattr(self.learner, method)(*args)

    def ready(self) -> bool:
        return True


class ActorCalls:
    """`harness.live.trainer.Calls` for a learner in a `TrainerActor`."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    async def call(self, method: str, *args: Any) -> Any:
        return await self.actor.call.remote(method, *args)

    async def ready(self) -> None:
        """Wait until the actor has built its model (before the clock matters)."""
        await self.actor.ready.remote()


def ray_env() -> dict[str, Any]:
    from harness.live.env import LIVE_ENV
    from harness.live.logs import actor_env

    return {"env_vars": {**LIVE_ENV, **actor_env()}}


def start_engine(cfg: RunConfig) -> Any:
    import ray

    live = cfg.live
    actor = ray.remote(EngineActor).options(
        num_cpus=0, num_gpus=live.engine_gpus, runtime_env=ray_env(), max_concurrency=10_000)
    return actor.remote(live.model_dir, live.max_model_len, live.kv_cache_mb, cfg.seed)


def start_trainer(cfg: RunConfig) -> Any:
    import ray

    live = cfg.live
    actor = ray.remote(TrainerActor).options(num_cpus=0, num_gpus=live.trainer_gpus,
                                             runtime_env=ray_env())
    return actor.remote(cfg)


def connect(address: str) -> bool:
    """Ray for a live run: its actors get the live runtime's environment."""
    from harness.live.env import LIVE_ENV
    from harness.shared.ray_connect import connect as ray_connect

    return ray_connect(address, env_vars=LIVE_ENV)


@contextmanager
def session(address: str) -> Iterator[None]:
    """One Ray for several runs (the demo, validate): actors start fresh per run,
    Ray itself once. 'off' does nothing."""
    started = address != "off" and connect(address)
    try:
        yield
    finally:
        if started:
            import ray

            ray.shutdown()


