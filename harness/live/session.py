"""One engine and one learner lent to many live runs (a validation grid).

Starting vLLM and loading the learner take tens of seconds on a CPU, so a grid
of dozens of short runs would spend most of its time starting. A `Session`
starts both once, in this process, measures them (the calibration a simulated
twin uses is taken from this very engine, with the same settings) and lends
them to each run. Between runs the engine's prefix cache is emptied and its
weights version reset, so no run finds another's prompts cached or starts on
another's version. Only for `live.ray_address = "off"` and the in-process vLLM.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.config import RunConfig


@dataclass
class Session:
    """What `LiveRuntime` borrows instead of starting its own."""

    backend: Any  # VLLMLocalBackend
    calls: Any  # InThread(GRPOLearner)
    publish_with: str = "save"
    key: tuple[Any, ...] = ()  # the engine settings it was started with

    async def lend(self) -> None:
        """Ready for the next run: nothing cached, nothing paused, version 0."""
        await self.backend.resume()
        await self.backend.llm.reset_prefix_cache()
        self.backend.version = 0

    async def close(self) -> None:
        from harness.live.cores import unpin

        await self.backend.shutdown()
        if hasattr(self.calls, "close"):
            self.calls.close()
        unpin()


def engine_key(cfg: RunConfig) -> tuple[Any, ...]:
    """The settings that need another engine when they change."""
    live = cfg.live
    return (live.model_dir, live.max_model_len, live.kv_cache_mb, cfg.seed, live.trainer_cores)


async def open_session(cfg: RunConfig) -> Session:
    from harness.live.learner import make_learner
    from harness.live.trainer import InThread
    from harness.live.vllm_local import VLLMLocalBackend

    live = cfg.live
    if live.trainer_cores:  # pinned before the engine starts: its core inherits the mask
        from harness.live.cores import InChild, pin_engine

        calls: Any = InChild(cfg, pin_engine(live.trainer_cores))
    else:
        calls = InThread(make_learner(cfg))
    backend = VLLMLocalBackend.start(live.model_dir, live.max_model_len, live.kv_cache_mb,
                                     cfg.seed)
    await backend.warm_up([20 + i for i in range(16)])
    if hasattr(calls, "ready"):
        await calls.ready()
    from harness.live.cores import control_beside_trainer

    control_beside_trainer(calls)
    return Session(backend, calls, key=engine_key(cfg))


async def measure(session: Session, cfg: RunConfig, out: Path) -> dict[str, Any]:
    """This session's calibration, from microbenchmarks only: the engine's decode and
    prefill (`measure_decode`), the trainer's per-token and per-sequence cost, and one
    weight publication (save, then install in the engine); written to `out`."""
    import asyncio

    from harness.live.measure import measure_decode, measure_trainer, write_calibration

    live = cfg.live
    engine = await measure_decode(session.backend.llm, live.max_model_len)
    lengths = (16, live.max_model_len // 8, live.max_model_len // 2)
    if hasattr(session.calls, "run"):  # on the trainer's own cores
        trainer = await session.calls.run(measure_trainer, live.model_dir, lengths)
    else:
        trainer = await asyncio.to_thread(measure_trainer, live.model_dir, lengths)
    start = time.perf_counter()
    for _ in range(3):
        await session.backend.install(0, await session.calls.call(session.publish_with))
    sync = (time.perf_counter() - start) / 3
    write_calibration(out, live.model_dir, engine, trainer, weight_sync_s=sync,
                      settings={"max_model_len": live.max_model_len,
                                "kv_cache_mb": live.kv_cache_mb})
    return {"decode": engine, "train": trainer, "weight_sync_s": sync, "file": str(out)}
