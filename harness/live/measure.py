"""`rolloutbench calibrate engine`: measure this machine's live engine and trainer.

The engine is timed on fixed-length generations (end-of-sequence ignored) at
several batch sizes and prompt lengths; a least-squares fit of

    step time = fixed + per_seq x batch + per_ctx_token x context tokens

gives the simulator's decode model for this machine, and a long prompt with
one new token gives the prefill cost per token. The trainer is timed on
backward passes over sequences of known length (seconds per token). The result
is a calibration file (`[decode]`, `[train]`) the simulator uses in place of
its roofline, so simulated and live runs of the same system can be compared.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import numpy as np

BATCHES = (1, 4, 16, 32)
PROMPTS = (16, 192)
NEW_TOKENS = 48


async def _generate(llm: Any, batch: int, prompt_len: int, new_tokens: int, tag: str) -> float:
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=new_tokens, ignore_eos=True, temperature=1.0,
                            logprobs=0)

    async def one(i: int) -> None:
        prompt = {"prompt_token_ids": [(7 * i + j) % 200 + 20 for j in range(prompt_len)]}
        async for _ in llm.generate(prompt, params, request_id=f"{tag}-{i}"):
            pass

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(batch)))
    return time.perf_counter() - start


async def measure_engine(model_dir: str, kv_cache_mb: int = 256) -> dict[str, float]:
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    llm = AsyncLLM.from_engine_args(AsyncEngineArgs(
        model=model_dir, dtype="bfloat16", enforce_eager=True, max_model_len=1024,
        distributed_executor_backend="uni", kv_cache_memory_bytes=kv_cache_mb << 20, seed=0))
    try:
        await _generate(llm, 2, 16, 8, "warm")
        prefill_long = await _generate(llm, 1, 768, 1, "prefill-long")
        prefill_short = await _generate(llm, 1, 16, 1, "prefill-short")
        # A request's fixed cost (intake, scheduling, output handling): many one-token
        # requests against one, beyond their prompt tokens.
        many = await _generate(llm, 32, 16, 1, "admit-many")
        rows, times = [], []
        for prompt_len in PROMPTS:
            for batch in BATCHES:
                took = await _generate(llm, batch, prompt_len, NEW_TOKENS, f"b{batch}p{prompt_len}")
                ctx = batch * (prompt_len + NEW_TOKENS / 2)  # mean context over the run
                rows.append([1.0, batch, ctx])
                times.append(took / NEW_TOKENS)  # prefill is small next to 48 steps
    finally:
        llm.shutdown()
    coef, *_ = np.linalg.lstsq(np.array(rows), np.array(times), rcond=None)
    fixed, per_seq, per_ctx = (float(max(c, 0.0)) for c in coef)
    return {"fixed_s": fixed, "per_seq_s": per_seq, "per_ctx_token_s": per_ctx,
            "prefill_per_token_s": max(prefill_long - prefill_short, 0.0) / (768 - 16),
            "admit_per_request_s": max(many - prefill_short, 0.0) / 31,
            "fit_rms_s": float(np.sqrt(np.mean((np.array(rows) @ coef - times) ** 2)))}


def measure_trainer(model_dir: str, lengths: tuple[int, ...] = (16, 64, 256)
                    ) -> dict[str, float]:
    """Seconds per sequence (a forward/backward call's fixed cost) and per token,
    fitted over sequence lengths, and one optimizer step."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for n in lengths:
        x = torch.randint(20, 200, (1, n))
        model(x).logits.sum().backward()  # warm
        start = time.perf_counter()
        for _ in range(5):
            model(x).logits.float().log_softmax(-1).mean().backward()
        times.append((time.perf_counter() - start) / 5)
    per_token, per_sequence = np.polyfit(np.array(lengths, dtype=float), np.array(times), 1)
    start = time.perf_counter()
    for _ in range(5):
        opt.step()
    return {"seconds_per_token": float(max(per_token, 0.0)),
            "per_sequence_s": float(max(per_sequence, 0.0)),
            "optimizer_s": (time.perf_counter() - start) / 5}


async def _ray_costs(engine: Any, calls: Any, prompt: list[int]) -> dict[str, float]:
    from harness.live.engine import Generation, Sampling

    async def burst(n: int, tag: str) -> float:
        async def one(i: int) -> None:
            await engine.generate(Sampling(f"{tag}-{i}", prompt, 1, 0, 1.0), Generation(),
                                  lambda: None)

        start = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        return time.perf_counter() - start

    await engine.warm_up(prompt)
    await calls.ready()
    await burst(4, "warm")
    single, many = await burst(1, "one"), await burst(32, "many")
    start = time.perf_counter()
    for _ in range(10):
        await calls.ready()
    call = (time.perf_counter() - start) / 10
    start = time.perf_counter()
    await engine.install(1, await calls.call("export"))
    return {"admit_per_request_s": max(many - single, 0.0) / 31, "call_s": call,
            "weight_sync_s": time.perf_counter() - start}


def measure_ray(model_dir: str) -> dict[str, float]:
    """What the Ray actors add: a request's fixed cost through the engine actor's
    streaming call (one-token requests, many against one, as in process), a
    trainer call's round trip, and one weight publication (export, object store,
    install)."""
    import ray

    from harness.config import RunConfig
    from harness.live.ray_actors import (
        ActorCalls,
        RayEngineBackend,
        connect,
        start_engine,
        start_trainer,
    )

    cfg = RunConfig(runtime="live")
    cfg.live.model_dir = model_dir
    started = connect("local")
    engine, calls = RayEngineBackend(start_engine(cfg)), ActorCalls(start_trainer(cfg))
    try:
        return asyncio.run(_ray_costs(engine, calls, [(7 * j) % 200 + 20 for j in range(16)]))
    finally:
        ray.kill(engine.actor)
        ray.kill(calls.actor)
        if started:
            ray.shutdown()


def _write(out: Path, model_dir: str, how: str, engine: dict[str, float],
           trainer: dict[str, float], weight_sync_s: float, micro_overhead_s: float) -> None:
    from harness.results import git_commit, write_atomic

    lines = ["# Written by `rolloutbench calibrate engine`: measured on this machine's live",
             f"# engine and trainer {how} (model {model_dir}). commit: {git_commit()}", "",
             "[fixed]", "materialize_s = 0.0", f"weight_sync_s = {weight_sync_s!r}",
             "switch_s = 0.0", "drift = 0.0", f"micro_overhead_s = {micro_overhead_s!r}",
             "# roofline parameters are unused when [decode] is present",
             "bw_eff = 1.0", "step_overhead_s = 0.0", "compute_eff = 1.0", "train_mfu = 1.0",
             "", "[decode]"]
    lines += [f"{k} = {v!r}" for k, v in engine.items()]
    lines += ["", "[train]"] + [f"{k} = {v!r}" for k, v in trainer.items()]
    write_atomic(out, "\n".join(lines) + "\n")


def calibrate_engine(model_dir: str, out: Path, ray_out: Path | None = None) -> dict[str, Any]:
    """Measure, then write the `cpu-live` calibration (engine and trainer in one
    process) and, when Ray is installed and `ray_out` given, `cpu-live-ray`: the
    same with what the actors add per request, per trainer call and per weight
    publication, each measured, none fitted to live runs."""
    engine = asyncio.run(measure_engine(model_dir))
    trainer = measure_trainer(model_dir)
    _write(out, model_dir, "in one process", engine, trainer, 0.05, 0.0)
    result: dict[str, Any] = {"decode": engine, "train": trainer, "file": str(out)}
    if ray_out is not None:
        ray = measure_ray(model_dir)
        _write(ray_out, model_dir, "as Ray actors", {**engine, "admit_per_request_s":
               ray["admit_per_request_s"]},
               {**trainer, "optimizer_s": trainer["optimizer_s"] + ray["call_s"]},
               ray["weight_sync_s"], ray["call_s"])
        result["ray"] = {**ray, "file": str(ray_out)}
    return result
