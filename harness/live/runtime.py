"""The live runtime: a real engine, a real torch trainer, real verifiers.

The same system code that runs on the simulator runs here, on the ordinary
asyncio loop and the wall clock. By default (`live.ray_address = "local"`) the
engine and the trainer are Ray actors and this runtime itself runs in the
control-node actor (see `harness.live.ray_actors`); with `"off"` all three share
this process, the trainer's compute in a worker thread, or in a child process on
cores of its own with `live.trainer_cores` (see `harness.live.cores`). The engine backend is
chosen by `live.engine`: vLLM in process, a vLLM server or an SGLang server over
HTTP. Components with no meaning on one CPU engine (tensor-parallel planning,
resizing, colocation) are recorded as `decision` events with `not_applicable`
and the run carries on.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from harness.core.config import RunConfig
from harness.core.runtime import Request
from harness.live import cores, precision
from harness.live.engine import NOT_APPLICABLE, LiveEngine
from harness.live.env import LIVE_ENV
from harness.live.session import Session
from harness.live.trainer import LiveTrainer
from harness.live.workload import LiveVerifier, LiveWorkload, ReplayVerifier
from harness.shared.runner import RunnerBase
from workloads.profile import make_workload
from workloads.replay import synthetic_prompt_ids, target_tokens


def missing(*names: str) -> list[str]:
    """Which of these packages this machine lacks (looked for, not imported)."""
    import importlib.util

    return [name for name in names if importlib.util.find_spec(name) is None]


def available() -> dict[str, bool]:
    """Which live components can be imported on this machine."""
    lacking = missing("vllm", "torch", "transformers", "ray")
    return {name: name not in lacking for name in ("vllm", "torch", "transformers", "ray")}


def missing_live() -> list[str]:
    """The packages a live run needs and this machine lacks (Ray is optional)."""
    return missing("vllm", "torch", "transformers")


def _cores(trainer_cores: int) -> dict[str, list[int]]:
    """Which cores each side ran on (every usable core for all when not split)."""
    if not trainer_cores:
        every = cores.usable_cores()
        return {"engine": every, "control": every, "trainer": every}
    engine, trainer = cores.split(trainer_cores)
    return {"engine": sorted(engine), "control": sorted(trainer), "trainer": sorted(trainer)}


class LiveRuntime(RunnerBase):
    name = "live"

    def __init__(self, cfg: RunConfig, trace_path: str | Path, actors: bool = False,
                 session: Session | None = None) -> None:
        self.actors = actors
        self.session = session  # an engine and learner lent for this run (validation)
        for key, value in LIVE_ENV.items():
            os.environ.setdefault(key, value)
        self._t0 = time.monotonic()
        super().__init__(cfg, trace_path)
        from transformers import AutoTokenizer

        live = cfg.live
        self._tok = AutoTokenizer.from_pretrained(live.model_dir)
        self.replay = live.lengths == "replay"
        if self.replay:  # the simulator's prompt stream: same prompts, lengths, rewards
            self.workload: Any = make_workload(cfg.workload, cfg.seed, cfg.group_size)
            self.verifier: Any = ReplayVerifier()
        else:
            self.workload = LiveWorkload(cfg.workload, cfg.seed, self._count, live.data_dir)
            self.verifier = LiveVerifier(self.workload)
        self._prompts: dict[int, list[int]] = {}
        self.engine: Any = None
        self.trainer: Any = None

    def now(self) -> float:
        return time.monotonic() - self._t0

    def header(self) -> dict[str, Any]:
        live = self.config.live
        backend = self.session.backend if self.session is not None else None
        facts = backend.facts() if hasattr(backend, "facts") else {}
        return {"lengths": live.lengths, "engine_facts": facts,
                "live": {"components": available(), "env": LIVE_ENV, "engine": live.engine,
                         "trainer": live.trainer, "cores": _cores(live.trainer_cores),
                         "ray": live.ray_address if self.actors else "off",
                         "not_applicable": NOT_APPLICABLE,
                         "engine_precision": precision.describe(live.engine)}}

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
        prompt = request.prompt
        if prompt.index not in self._prompts:
            self._prompts[prompt.index] = (
                synthetic_prompt_ids(prompt.index, prompt.tokens, len(self._tok),
                                     self.config.seed)
                if self.replay else self._ids(prompt.text))
        return self._prompts[prompt.index]

    # -- engine and trainer ----------------------------------------------------
    async def _setup(self) -> None:
        from harness.live import backends

        cfg, live = self.config, self.config.live
        if self.session is not None:  # borrowed: already started and warm
            await self.session.lend()
            calls, publish_with = self.session.calls, self.session.publish_with
            backend = self.session.backend
        else:
            # starts loading; pins this process first with live.trainer_cores
            calls, publish_with = backends.trainer_calls(cfg, self.actors)
            self._calls = calls
            backend = self._backend = await backends.engine_backend(cfg, self.actors)
            if hasattr(backend, "warm_up"):  # compile kernels before the clock matters
                await backend.warm_up(self._ids("warm up"))
                self.emit("decision", what="engine_warm_up")
        self.engine = LiveEngine(backend, self.prompt_ids, self.emit, live.temperature,
                                 live.request_timeout_s or None,
                                 target_tokens if self.replay else None)
        if hasattr(calls, "ready"):
            await calls.ready()
        if self.session is None:
            cores.control_beside_trainer(calls)
        self.trainer = LiveTrainer(calls, self.engine, self.emit, self.prompt_ids, publish_with)
        sim = cfg.sim
        if sim.placement == "colocated":
            self.engine.not_applicable("colocated placement")
        if sim.rollout_engines > 1:
            self.engine.not_applicable("engine replicas")

    async def _teardown(self) -> None:
        """Stop whatever `_setup` got as far as starting (a borrowed engine is only
        cleared of this run's requests)."""
        if self.session is not None:
            if self.engine is not None:
                await self.engine.release()
            return
        if self.engine is not None:
            await self.engine.shutdown()
        elif getattr(self, "_backend", None) is not None:
            await self._backend.shutdown()
        calls = getattr(self, "_calls", None)
        if hasattr(calls, "actor"):
            import ray

            ray.kill(calls.actor)
        elif hasattr(calls, "close"):
            calls.close()
        cores.unpin()
