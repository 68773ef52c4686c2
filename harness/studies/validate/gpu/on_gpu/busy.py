"""How busy the GPU is during a call, and what one kernel launch costs the host (torch only).

Why: Megatron's local (non-Transformer-Engine) modules issue many small kernels from Python;
when the host's time to issue a training step is near the step's GPU time, the GPU idles
between kernels and the step's time measures the host, not the matrix units. These two
numbers, stored with the timings, say which of the two a row measures.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


def gpu_busy(fn: Callable[[], object]) -> tuple[float, int]:
    """(ms the GPU spent in kernels, kernels launched) over one call of `fn`, from the
    torch profiler's device events; (0.0, 0) where no CUDA events are seen (a CPU)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    kernels = [e for e in prof.events()
               if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA]
    busy_us = sum(e.time_range.elapsed_us() for e in kernels)
    return busy_us / 1e3, len(kernels)


def launch_cost(device: str, n: int = 20000) -> dict[str, float]:
    """µs of host time per tiny torch op (a one-element add, its kernel queued, not waited
    for) and per million iterations of an empty Python loop: the host's speed."""
    x = torch.zeros(1, device=device)
    for _ in range(100):
        x.add_(1)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    per_op = (time.perf_counter() - start) / n * 1e6
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(1_000_000):
        pass
    return {"torch_op_us": round(per_op, 2),
            "python_loop_ms_per_million": round((time.perf_counter() - start) * 1e3, 1)}
