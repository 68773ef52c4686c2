"""`rolloutbench calibrate engine`: measure this machine's live engine and trainer.

The engine's decode step is timed on fixed-length generations (end-of-sequence
ignored) over a grid of batch sizes and prompt lengths that spans the engine's
context: every token's arrival is stamped, and a step's time is read from the
window in which all b sequences are decoding (after the last first token,
before the first last token), so prefill and stragglers do not leak into it.
A least-squares fit, weighted by 1/time so small batches count as much as big
ones, of

    step time = fixed + per_seq x batch + per_ctx_token x context tokens

gives the simulator's decode model for this machine; bursts of one-token
requests of several sizes give a request's intake cost and the prefill cost per
prompt token (`measure_admission`). The trainer is timed on backward passes
over sequences of known length (seconds per token). The result is a calibration
file (`[decode]`, `[train]`) the simulator uses in place of its roofline.
"""

from __future__ import annotations

import asyncio
import json
import math
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from harness.live.engine import Generation, Sampling

BATCHES = (1, 4, 16, 32, 64, 128)  # 128: the CPU engine's max_num_seqs
NEW_TOKENS = 48


def prompt_lengths(max_model_len: int) -> tuple[int, ...]:
    """Prompt lengths that take the context from short to most of the window."""
    room = max_model_len - NEW_TOKENS - 1
    return tuple(sorted({16, max(16, room // 4), max(16, room * 3 // 4)}))


def _ids(i: int, n: int) -> list[int]:
    return [(7 * i + 13 * j + j * j) % 900 + 20 for j in range(n)]


class _Stamped(Generation):
    """A generation that stamps each chunk's arrival."""

    def __init__(self) -> None:
        super().__init__()
        self.stamps: list[float] = []

    def add(self, ids: list[int], logprobs: list[float], text: str, version: int) -> None:
        super().add(ids, logprobs, text, version)
        self.stamps += [time.perf_counter()] * len(ids)


async def _stamped(llm: Any, batch: int, prompt_len: int, new_tokens: int, tag: str
                   ) -> tuple[list[list[float]], float]:
    """Generate `batch` requests through the live runtime's own client path
    (`VLLMLocalBackend.generate`: its sampling settings and its per-chunk work,
    which shares the engine's cores); each token's arrival time, and the wall time."""
    from harness.live.vllm_local import VLLMLocalBackend

    backend = VLLMLocalBackend(llm)
    gens = [_Stamped() for _ in range(batch)]

    async def one(i: int) -> None:
        s = Sampling(f"{tag}-{i}", _ids(i, prompt_len), new_tokens, 0, 1.0, exact=True)
        await backend.generate(s, gens[i], lambda: None)

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(batch)))
    return [g.stamps for g in gens], time.perf_counter() - start


def step_time(stamps: list[list[float]]) -> tuple[float, float]:
    """(seconds per decode step, steps) in the window where every sequence decodes:
    from the last first-token to the first last-token."""
    t0, t1 = max(s[0] for s in stamps), min(s[-1] for s in stamps)
    steps = statistics.median(sum(1 for x in s if t0 < x <= t1) for s in stamps)
    return ((t1 - t0) / steps, steps) if steps else (float("nan"), 0.0)


STEP_REPEATS = 3
"""Each shape is timed this many times and the median kept: the step a run sees
is a typical one, not the fastest. Keeping the faster of two timings, as this did
before, read the step fast by a median 2.6% and 4.1% over the shapes of two
calibrations (up to 30% and 37% for one shape) against the median of three on the
same timings, and every twin ran that much ahead (docs/validation.md). A shape's
first generation, which may pay for warming it, is run beforehand, untimed."""


async def typical_step(llm: Any, batch: int, prompt_len: int, tag: str
                       ) -> tuple[float, float]:
    """(seconds per decode step, steps) of `batch` sequences at `prompt_len`: a
    warming generation, then the median of STEP_REPEATS timed ones."""
    await _stamped(llm, batch, prompt_len, 8, f"{tag}-warm")
    timed = [step_time((await _stamped(llm, batch, prompt_len, NEW_TOKENS, f"{tag}-{i}"))[0])
             for i in range(STEP_REPEATS)]
    # a timing with no window where every sequence decodes is NaN: the median of the
    # others (sorting with a NaN among them would put it anywhere)
    known = sorted(t for t in timed if math.isfinite(t[0]))
    return known[len(known) // 2] if known else (float("nan"), 0.0)


def admissions(max_model_len: int) -> tuple[tuple[int, int], ...]:
    """(requests, prompt tokens) of the one-token bursts that time admission."""
    long = max_model_len // 2
    return ((1, 16), (1, long), (8, 16), (8, long // 2), (32, 16), (32, long // 8),
            (64, 64))


async def measure_admission(llm: Any, max_model_len: int) -> dict[str, float]:
    """A request's fixed intake cost and the prefill cost per prompt token, fitted
    over bursts of one-token requests (each shape run once to warm it, then timed
    twice, the faster kept): time = base + admit x requests + prefill x tokens."""
    rows, times = [], []
    for batch, prompt_len in admissions(max_model_len):
        tag = f"admit-b{batch}p{prompt_len}"
        await _stamped(llm, batch, prompt_len, 1, f"{tag}-warm")
        took = min([(await _stamped(llm, batch, prompt_len, 1, f"{tag}-{i}"))[1]
                    for i in range(2)])
        rows.append([1.0, batch, batch * prompt_len])
        times.append(took)
    x, y = np.array(rows), np.array(times)
    coef, *_ = np.linalg.lstsq(x / y[:, None], np.ones_like(y), rcond=None)
    fit = x @ coef
    return {"prefill_per_token_s": float(max(coef[2], 0.0)),
            "admit_per_request_s": float(max(coef[1], 0.0)),
            "admit_fit_rel_rms": float(np.sqrt(np.mean(((fit - y) / y) ** 2)))}


async def measure_decode(llm: Any, max_model_len: int) -> dict[str, float]:
    """Measure a running `AsyncLLM` (the same engine a validation then uses)."""
    await _stamped(llm, 2, 16, 8, "warm")
    admission = await measure_admission(llm, max_model_len)
    rows, times = [], []
    for prompt_len in prompt_lengths(max_model_len):
        for batch in BATCHES:
            took, steps = await typical_step(llm, batch, prompt_len, f"b{batch}p{prompt_len}")
            if steps >= NEW_TOKENS // 4:
                rows.append([1.0, batch, batch * (prompt_len + NEW_TOKENS / 2)])
                times.append(took)
    x, y = np.array(rows), np.array(times)
    weight = 1.0 / y  # relative error: small batches count as much as large ones
    coef, *_ = np.linalg.lstsq(x * weight[:, None], y * weight, rcond=None)
    fixed, per_seq, per_ctx = (float(max(c, 0.0)) for c in coef)
    fit = x @ np.array([fixed, per_seq, per_ctx])
    return {"fixed_s": fixed, "per_seq_s": per_seq, "per_ctx_token_s": per_ctx,
            **admission, "fit_rel_rms": float(np.sqrt(np.mean(((fit - y) / y) ** 2))),
            "points": len(y), "max_batch": float(max(BATCHES)),
            "max_context_tokens": float(x[:, 2].max())}


PROBE_BATCHES = (1, 4, 16, 64)  # a rollout's tail, where the systems part ways


async def probe_decode(llm: Any, max_model_len: int, tag: str) -> list[dict[str, float]]:
    """The decode step re-measured in a few seconds: batches of a rollout's tail at one
    mid-window prompt length, each timed as `measure_decode` times them. `validate`
    runs it beside every cell, so the machine's drift since the calibration is
    measured instead of read as the step model's error."""
    prompt = prompt_lengths(max_model_len)[1]
    rows = []
    for batch in PROBE_BATCHES:
        took, _ = await typical_step(llm, batch, prompt, f"{tag}-b{batch}")
        rows.append({"batch": batch, "context_tokens": batch * (prompt + NEW_TOKENS / 2),
                     "step_s": took})
    return rows


async def measure_engine(model_dir: str, max_model_len: int = 2048, kv_cache_mb: int = 256
                         ) -> dict[str, float]:
    """Start an in-process engine with these settings, measure it, stop it."""
    from harness.live.vllm_local import VLLMLocalBackend

    backend = VLLMLocalBackend.start(model_dir, max_model_len, kv_cache_mb, 0)
    try:
        return await measure_decode(backend.llm, max_model_len)
    finally:
        await backend.shutdown()


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

    from harness.core.config import RunConfig
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


def machine() -> dict[str, str]:
    """Which machine a calibration was measured on, and when."""
    import platform
    import socket

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")),
                       cpu)
    except OSError:
        pass
    return {"host": socket.gethostname(), "cpu": cpu, "measured_at":
            time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def _write(out: Path, model_dir: str, how: str, engine: dict[str, float],
           trainer: dict[str, float], weight_sync_s: float, micro_overhead_s: float,
           settings: dict[str, Any] | None = None) -> None:
    from harness.core.files import git_commit, write_atomic

    lines = ["# Written by `rolloutbench calibrate engine`: measured on this machine's live",
             f"# engine and trainer {how} (model {model_dir}). commit: {git_commit()}", "",
             "[machine]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in {**machine(), **(settings or {})}.items()]
    lines += ["", "[fixed]", "materialize_s = 0.0", f"weight_sync_s = {weight_sync_s!r}",
             "switch_s = 0.0", "drift = 0.0", f"micro_overhead_s = {micro_overhead_s!r}",
             "# roofline parameters are unused when [decode] is present",
             "bw_eff = 1.0", "step_overhead_s = 0.0", "compute_eff = 1.0", "train_mfu = 1.0",
             "", "[decode]"]
    lines += [f"{k} = {v!r}" for k, v in engine.items()]
    lines += ["", "[train]"] + [f"{k} = {v!r}" for k, v in trainer.items()]
    write_atomic(out, "\n".join(lines) + "\n")


def write_calibration(out: Path, model_dir: str, engine: dict[str, float],
                      trainer: dict[str, float], weight_sync_s: float = 0.05,
                      settings: dict[str, Any] | None = None) -> None:
    """The in-process calibration file (engine and trainer in one process)."""
    _write(out, model_dir, "in one process", engine, trainer, weight_sync_s, 0.0, settings)


def calibrate_engine(model_dir: str, out: Path, ray_out: Path | None = None,
                     max_model_len: int = 2048, kv_cache_mb: int = 256) -> dict[str, Any]:
    """Measure, then write `out` (engine and trainer in one process) and, when Ray
    is installed and `ray_out` given, `ray_out`: the same with what the actors add
    per request, per trainer call and per weight publication, each measured, none
    fitted to live runs."""
    engine = asyncio.run(measure_engine(model_dir, max_model_len, kv_cache_mb))
    trainer = measure_trainer(model_dir)
    write_calibration(out, model_dir, engine, trainer,
                      settings={"max_model_len": max_model_len, "kv_cache_mb": kv_cache_mb})
    result: dict[str, Any] = {"decode": engine, "train": trainer, "file": str(out)}
    if ray_out is not None:
        ray = measure_ray(model_dir)
        _write(ray_out, model_dir, "as Ray actors", {**engine, "admit_per_request_s":
               ray["admit_per_request_s"]},
               {**trainer, "optimizer_s": trainer["optimizer_s"] + ray["call_s"]},
               ray["weight_sync_s"], ray["call_s"])
        result["ray"] = {**ray, "file": str(ray_out)}
    return result
