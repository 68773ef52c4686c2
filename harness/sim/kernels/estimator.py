"""One decode step or prefill from aiconfigurator-core's measured kernels: offline and quiet.

The estimator is handed a local folder with a `config.json`, always: given a bare model
name it would try to download one from a model hub, which this project never does. Its
warnings about fallback rows and versions are kept off the user's terminal; what they mean
for a number is said once, by `step_source`.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from harness.core.config import ConfigError
from harness.core.files import write_atomic
from harness.sim.engine_spec import EngineSpec
from harness.sim.kernels.gpus import KernelGpu
from harness.sim.perf import DecodeModel

# An all-reduce or p2p op among `decode_ops`' names (ar_1, embedding_ar, p2p, ...).
_COMM_OP = re.compile(r"((^|_)ar(_\d+)?$)|p2p|all_?reduce")


class KernelError(ConfigError):
    """The estimator cannot model this engine; the message is one line for a user."""


# Dense GEMM tables a framework's collector times without a CUDA graph, so they hold host
# dispatch, not the kernel, and the graph-timed table of the same framework, version and GPU
# that prices those GEMMs instead. vLLM's collector times every GEMM dtype in a graph but
# block-FP8 (ai-dynamo/aiconfigurator@095f58a5:collector/vllm/collect_gemm.py:212,241-248,
# `use_cuda_graph=gemm_type != "fp8_block"`, since 4bed48d96), and its fp8_block table runs
# flat at 0.16-0.23 ms a GEMM from m = 1 to 256 on B200 (n = k = 4096; 0.06 ms at m <= 16
# on H100/H200), against 0.009-0.025 ms for its graph-timed per-tensor FP8. The per-tensor table
# is used rather than SGLang's block-FP8 one (graph-timed, the DeepGEMM kernel vLLM also
# runs): same framework, version, collector and shape grid (SGLang's skips n or k < 128,
# collector/sglang/collect_gemm.py:86); on B200 SGLang's two FP8 tables differ by 10-25%
# at these shapes, less than either differs from vLLM's eager one. MoE GEMMs are not dense
# GEMMs: `moe_quant_mode` stays block-scaled.
EAGER_GEMMS = {("vllm", "fp8_block"): "fp8"}


def graph_timed(backend: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The estimator's compile options with a dense GEMM dtype whose table is timed eagerly
    (EAGER_GEMMS) priced from its graph-timed stand-in; the rest as given."""
    swap = EAGER_GEMMS.get((backend, str(kwargs.get("gemm_quant_mode"))))
    return {**kwargs, "gemm_quant_mode": swap} if swap else kwargs


def gemm_note(spec: EngineSpec) -> str:
    """What `step_source` adds for an engine whose dense GEMMs `graph_timed` re-prices
    ("" for any other)."""
    asked = spec.estimator_kwargs().get("gemm_quant_mode")
    swap = EAGER_GEMMS.get((spec.backend, str(asked)))
    return f":dense-{asked}-as-{swap}" if swap else ""


# The database's own words for a MoE shape it never measured: its quantisation and where.
_MOE_MISSING = re.compile(r'MoE data missing for MoeKey \{ quant: "(?P<quant>[^"]+)".*\} at '
                          r'.*/(?P<backend>[^/]+)/(?P<version>[^/]+)$')


def reason(err: BaseException, width: int = 160) -> str:
    """Why the estimator failed, in words and whole: a MoE shape the database never
    measured is named by its quantisation and framework (its raw key ran past any
    width, and was cut mid-word); any other first line is shortened at a word."""
    import textwrap

    first = (str(err).strip().splitlines() or [type(err).__name__])[0]
    found = _MOE_MISSING.search(first)
    if found is not None:
        return (f"it measured no {found['quant']} MoE kernels of this shape for "
                f"{found['backend']} {found['version']}")
    return textwrap.shorten(first, width, placeholder=" ...")


def package_version() -> str:
    from importlib.metadata import version

    return version("aiconfigurator-core")


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence the estimator's prints and log lines, and keep it offline."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(var, "1")
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            yield
    finally:
        logging.disable(previous)


def _package_dir() -> Path:
    import aiconfigurator_core

    return Path(aiconfigurator_core.__file__).parent


@cache
def backend_version(system: str, backend: str) -> str | None:
    """The database's current version of `backend` on `system`, or None when it holds no
    measured GEMM table for that pair (the GPU or framework is not covered)."""
    import yaml

    with quiet():
        root = _package_dir() / "systems"
    slots = yaml.safe_load((root / "query_versions.yaml").read_text())
    entry = (slots.get("overrides") or {}).get(system, {}).get(backend)
    entry = entry or (slots.get("defaults") or {}).get(backend) or {}
    version = entry.get("current")
    if version and (root / "data" / system / "gemm" / backend / str(version)).is_dir():
        return str(version)
    return None


@cache
def gemm_dtypes(system: str, backend: str, version: str) -> frozenset[str]:
    """The GEMM dtypes the database measured for `backend` `version` on `system`."""
    import pyarrow.parquet as pq

    with quiet():
        root = _package_dir() / "systems" / "data" / system / "gemm" / backend / version
    path = root / "gemm_perf.parquet"
    if not path.exists():
        return frozenset()
    return frozenset(str(v) for v in pq.read_table(path, columns=["gemm_dtype"])
                     .column(0).unique().to_pylist())


def systems_with(backend: str, dtype: str) -> list[str]:
    """The database GPUs whose current `backend` GEMM table holds `dtype`, for a refusal."""
    with quiet():
        root = _package_dir() / "systems" / "data"
    out = []
    for system in sorted(p.name for p in root.iterdir() if p.is_dir()):
        version = backend_version(system, backend)
        if version and dtype in gemm_dtypes(system, backend, version):
            out.append(system)
    return out


def config_dir(config: dict[str, Any], cache_root: Path) -> Path:
    """A folder holding `config` as config.json, named by its content, for the estimator."""
    text = json.dumps(config, sort_keys=True, indent=1)
    folder = cache_root / "configs" / hashlib.sha256(text.encode()).hexdigest()[:16]
    if not (folder / "config.json").exists():
        write_atomic(folder / "config.json", text)
    return folder


@dataclass
class Estimator:
    """One engine replica (model, GPU, framework, layout) as the database prices it, with
    the stand-in GPU's scales and, for a `preset-link` GPU, the preset's own all-reduce."""

    spec: EngineSpec
    gpu: KernelGpu
    version: str
    folder: Path

    def __post_init__(self) -> None:
        from aiconfigurator_core.sdk.engine import EngineHandle

        spec = self.spec
        self.model, self.hw, self.tp, self.backend = spec.model, spec.hw, spec.tp, spec.backend
        self.dp = spec.attention_dp
        if self.dp != 1 and (self.gpu.stand_in or self.gpu.comm != "measured"):
            raise KernelError(f"sim.rollout_attention_dp: attention DP is priced on GPUs the "
                              f"database measures only; {spec.gpu_name} borrows "
                              f"{self.gpu.system}'s kernels")
        try:
            with quiet():
                self._handle = EngineHandle.compile(str(self.folder), self.gpu.system,
                                                    self.backend, backend_version=self.version,
                                                    tp_size=spec.attention_tp,
                                                    **graph_timed(self.backend,
                                                                  spec.estimator_kwargs()))
        except Exception as err:  # the estimator raises many kinds; one line for the user
            raise KernelError(f"sim.model: the kernel database cannot model "
                              f"{spec.describe()} on {self.gpu.system} ({reason(err)})"
                              ) from None
        link = DecodeModel.build(self.hw, self.model, self.tp, 1.0, 0.0, 1.0)
        self._link = (link.fixed_s * 1e3, link.per_seq_s * 1e3)
        if self.gpu.rule == "per-op":
            from harness.sim.kernels.standin import Dims
            from harness.sim.presets import load_hardware

            self._dims = Dims.of(self.model)
            self._measured_on = load_hardware(self.gpu.source)

    def _carried(self, ops: dict[str, float], batch: int, length: int, phase: str) -> float:
        """The ops measured on the database GPU carried to this one op class by op class
        (kernels/standin.py), summed."""
        from harness.sim.kernels.standin import carry_ops

        return sum(carry_ops(ops, self._dims, self.tp, batch, length, phase,
                             self._measured_on, self.hw, weight_bytes=self.spec.bytes_per_weight,
                             kv_bytes=self.spec.bytes_per_kv).values())

    def decode_ms(self, batch: int, context: int) -> float:
        """One decode step of `batch` sequences holding `context` tokens each, in ms. With
        attention DP the batch is the replica's, spread over its ranks; the estimator's batch
        is one rank's (its concurrency is batch x attention_dp_size: ai-dynamo/
        aiconfigurator@095f58a5:aic-core/src/aiconfigurator_core/sdk/backends/
        base_backend.py:712,1362-1364), and the step waits for the fullest rank."""
        if self.dp != 1:
            with quiet():
                return float(self._handle.decode_step_latency(-(-batch // self.dp), context, 2))
        if self.gpu.rule == "per-op":
            return self._carried(self.decode_ops(batch, context), batch, context, "decode")
        if self.gpu.comm == "measured" and self.gpu.decode_scale == 1.0:
            with quiet():
                return float(self._handle.decode_step_latency(batch, context, 2))
        ops = self.decode_ops(batch, context)
        compute = sum(ms for name, ms in ops.items() if not _COMM_OP.search(name))
        comm = sum(ms for name, ms in ops.items() if _COMM_OP.search(name))
        if self.gpu.comm == "preset-link":
            comm = (self._link[0] + self._link[1] * batch) if self.tp > 1 else 0.0
        return compute * self.gpu.decode_scale + comm

    def prefill_ms(self, batch: int, prompt: int) -> float:
        """Prefill of `batch` prompts of `prompt` tokens each, in ms; with attention DP,
        prompts on one rank (the other ranks prefill theirs in the same forward passes:
        `perf.StepJump.prefill_lanes`)."""
        with quiet():
            ms = float(self._handle.predict_prefill_latency(batch, prompt))
        if self.gpu.rule == "per-op":  # the database's batching, the rule's ratio
            ops = self.prefill_ops(prompt)
            return ms * self._carried(ops, 1, prompt, "prefill") / sum(ops.values())
        return ms * self.gpu.prefill_scale

    def decode_ops(self, batch: int, context: int) -> dict[str, float]:
        """The database's ms per operation of one decode step, all layers (names without
        the `generation_` prefix), as measured on `gpu.system`: no stand-in scale."""
        with quiet():
            ops = self._handle.decode_step_per_op(batch, context, 2)
        return {name.removeprefix("generation_"): float(ms) for name, ms, *_ in ops}

    def prefill_ops(self, prompt: int) -> dict[str, float]:
        """The database's ms per operation of one prompt's prefill (no `context_` prefix)."""
        with quiet():
            context, _ = self._handle.run_static_per_op(batch_size=1, isl=prompt, osl=1)
        return {name.removeprefix("context_"): float(ms) for name, ms, *_ in context}
