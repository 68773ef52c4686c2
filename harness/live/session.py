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
        await self.backend.shutdown()


def engine_key(cfg: RunConfig) -> tuple[Any, ...]:
    """The settings that need another engine when they change."""
    live = cfg.live
    return (live.model_dir, live.max_model_len, live.kv_cache_mb, cfg.seed)


async def open_session(cfg: RunConfig) -> Session:
    from harness.live.learner import make_learner
    from harness.live.trainer import InThread
    from harness.live.vllm_local import VLLMLocalBackend

    live = cfg.live
    backend = VLLMLocalBackend.start(live.model_dir, live.max_model_len, live.kv_cache_mb,
                                     cfg.seed)
    await backend.warm_up([20 + i for i in range(16)])
    return Session(backend, InThread(make_learner(cfg)), key=engine_key(cfg))


async def measure(session: Session, cfg: RunConfig, out: Path) -> dict[str, Any]:
    """This session's calibration, from microbenchmarks only: the engine's decode and
    prefill (`measure_decode`), the trainer's per-token and per-sequence cost, and one
    weight publication (save, then install in the engine); written to `out`."""
    import asyncio

    from harness.live.measure import measure_decode, measure_trainer, write_calibration

    live = cfg.live
    engine = await measure_decode(session.backend.llm, live.max_model_len)
    lengths = (16, live.max_model_len // 8, live.max_model_len // 2)
    trainer = await asyncio.to_thread(measure_trainer, live.model_dir, lengths)
    start = time.perf_counter()
    for _ in range(3):
        await session.backend.install(0, await session.calls.call(session.publish_with))
    sync = (time.perf_counter() - start) / 3
    write_calibration(out, live.model_dir, engine, trainer, weight_sync_s=sync,
                      settings={"max_model_len": live.max_model_len,
                                "kv_cache_mb": live.kv_cache_mb})
    return {"decode": engine, "train": trainer, "weight_sync_s": sync, "file": str(out)}
