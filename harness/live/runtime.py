"""The live runtime: a real vLLM engine, a real torch trainer, real verifiers.

The same system code that runs on the simulator runs here, on the ordinary
asyncio loop and the wall clock. This first version keeps engine and trainer
in one process (vLLM in-process on CPU, the trainer in a worker thread); the
Ray actors of the design come next. Components with no meaning on one CPU
engine (tensor-parallel planning, resizing, colocation) are recorded as
`decision` events with `not_applicable` and the run carries on.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from harness.config import RunConfig
from harness.live.engine import VLLMEngine
from harness.live.trainer import TorchTrainer
from harness.live.workload import LiveVerifier, LiveWorkload
from harness.runner import RunnerBase
from harness.runtime import Request

LIVE_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": "1"}


def available() -> dict[str, bool]:
    """Which live components can be imported on this machine."""
    import importlib.util

    return {name: importlib.util.find_spec(name) is not None
            for name in ("vllm", "torch", "transformers", "ray")}


def missing_live() -> list[str]:
    """The packages a live run needs and this machine lacks (Ray is optional)."""
    return [name for name, ok in available().items() if not ok and name != "ray"]


class LiveRuntime(RunnerBase):
    name = "live"

    def __init__(self, cfg: RunConfig, trace_path: str | Path) -> None:
        for key, value in LIVE_ENV.items():
            os.environ.setdefault(key, value)
        self._t0 = time.monotonic()
        super().__init__(cfg, trace_path)
        from transformers import AutoTokenizer

        live = cfg.live
        self._tok = AutoTokenizer.from_pretrained(live.model_dir)
        self.workload = LiveWorkload(cfg.workload, cfg.seed, self._count, live.data_dir)
        self.verifier = LiveVerifier(self.workload)
        self._prompts: dict[int, list[int]] = {}
        self.engine: Any = None
        self.trainer: Any = None

    def now(self) -> float:
        return time.monotonic() - self._t0

    def header(self) -> dict[str, Any]:
        return {"live": {"components": available(), "env": LIVE_ENV}}

    def _loop_run(self, coro: Any) -> None:
        asyncio.run(coro)

    # -- prompts -------------------------------------------------------------
    def _ids(self, text: str) -> list[int]:
        chat = self._tok.apply_chat_template([{"role": "user", "content": text}],
                                             add_generation_prompt=True, tokenize=False)
        return list(self._tok(chat, add_special_tokens=False)["input_ids"])

    def _count(self, text: str) -> int:
        return len(self._ids(text))

    def prompt_ids(self, request: Request) -> list[int]:
        index = request.prompt.index
        if index not in self._prompts:
            self._prompts[index] = self._ids(request.prompt.text)
        return self._prompts[index]

    # -- engine and trainer ----------------------------------------------------
    async def _setup(self) -> None:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        live = self.config.live
        args = AsyncEngineArgs(
            model=live.model_dir, dtype="bfloat16", enforce_eager=True,
            max_model_len=live.max_model_len, distributed_executor_backend="uni",
            kv_cache_memory_bytes=live.kv_cache_mb << 20, seed=self.config.seed,
            scheduling_policy="priority")
        self._llm = AsyncLLM.from_engine_args(args)
        self.engine = VLLMEngine(self._llm, self.prompt_ids, self.emit, live.temperature,
                                 live.request_timeout_s or None)
        self.trainer = TorchTrainer(live.model_dir, self.engine, self.emit, self.prompt_ids,
                                    lr=live.lr, clamp=self.config.clamp, seed=self.config.seed)
        await self._warm_up()
        for what in ("colocated placement", "engine replicas"):
            self.emit("decision", what="not_applicable", operation=what,
                      reason="one CPU process holds the engine and the trainer")

    async def _warm_up(self) -> None:
        """One short request before the clock matters: the first sampling call
        with log-probs compiles kernels (seconds), which is not scheduling."""
        from vllm import SamplingParams

        params = SamplingParams(max_tokens=4, logprobs=0)
        async for _ in self._llm.generate({"prompt_token_ids": self._ids("warm up")}, params,
                                          request_id="warm-up"):
            pass
        self.emit("decision", what="engine_warm_up")

    async def _teardown(self) -> None:
        llm = getattr(self, "_llm", None)
        if llm is not None:
            llm.shutdown()
