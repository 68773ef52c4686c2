"""The live trainer: GRPO on a Hugging Face causal LM with torch.

Per sample, the loss is token-level importance-weighted policy gradient,

    - sum_t min(w_t, clamp) * A * log pi(y_t)    with w_t = exp(log pi(y_t) - log mu(y_t)),

where mu's log-probs are the engine's (the behaviour policy, as sampled) and A
the group-normalised advantage; gradients accumulate over `train` calls and
`step` applies them. The w_t of a step give its ESS (PipelineRL Eq. 6), so live
ESS is measured, not modelled; on-policy it sits below 1 by the numerical gap
between engine and trainer (fp32) alone: a little with a bf16 engine, not at
all with an fp32 one (`harness.live.precision` chooses; `run_start` records it).
Weights reach the engine in the engine's own type, so an fp32 engine stays exact
after every update.

Two halves: `GRPOLearner` is the compute (plain, synchronous, picklable
inputs), so it can live in this process or in a Ray actor on the trainer node;
`LiveTrainer` is the runtime contract around it (events, the lock, publishing
to the engine). `Calls` says where the learner runs.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from harness.core.offpolicy import lag_histogram, measured_stats
from harness.core.runtime import Group, Request
from harness.live.precision import engine_dtype


@dataclass
class Sample:
    """One response as the learner needs it (plain lists: it may cross processes)."""

    prompt_ids: list[int]
    token_ids: list[int]
    logprobs: list[float]
    advantage: float
    version_spans: list[list[int]]


def passes(samples: Sequence[Sample]) -> list[Sample]:
    """The forward/backward passes `GRPOLearner.backward` runs: one per sample
    that has response tokens. Shared with `LiveTrainer`, so the `micro_batches`
    it writes to the trace is what the learner really runs."""
    return [s for s in samples if s.token_ids]


class GRPOLearner:
    """The policy and its optimizer; every method is synchronous compute."""

    def __init__(self, model_dir: str, lr: float = 1e-4, clamp: float = 5.0,
                 seed: int = 0) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        self._init(model, model_dir, lr, clamp)

    def _init(self, model: Any, model_dir: str, lr: float, clamp: float) -> None:
        import torch

        self._torch = torch
        self.model = model
        self.model.train()
        self._model_dir = model_dir
        self._opt = torch.optim.AdamW(self.model.parameters(), lr=lr)
        self._clamp = clamp
        self._publish_dtype = getattr(torch, engine_dtype())
        self.version = 0
        self._weights: list[np.ndarray] = []
        self._lags: dict[int, int] = {}
        self._dir: str | None = None

    def _logits(self, x: Any) -> Any:
        return self.model(x).logits[0]

    def backward(self, samples: list[Sample]) -> int:
        """Accumulate the gradient of a batch; returns its response tokens."""
        torch = self._torch
        total = sum(len(s.token_ids) for s in samples) or 1
        for s in passes(samples):
            x = torch.tensor([s.prompt_ids + s.token_ids])
            logits = self._logits(x)[len(s.prompt_ids) - 1 : -1].float()
            logp = torch.log_softmax(logits, dim=-1).gather(
                1, torch.tensor(s.token_ids)[:, None])[:, 0]
            behaviour = torch.tensor(s.logprobs or [float("nan")] * len(s.token_ids))
            w = torch.nan_to_num(torch.exp(logp.detach() - behaviour), nan=1.0)
            loss = -(torch.clamp(w, max=self._clamp) * s.advantage * logp).sum() / total
            loss.backward()
            self._weights.append(w.numpy().copy())
            for lag, n in lag_histogram(s.version_spans, self.version).items():
                self._lags[lag] = self._lags.get(lag, 0) + n
        return total

    def apply(self) -> dict[str, Any]:
        """The optimizer step; returns the step's measured off-policy statistics."""
        self._torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self._opt.step()
        self._opt.zero_grad(set_to_none=True)
        self.version += 1
        w = np.concatenate(self._weights) if self._weights else np.array([])
        stats = measured_stats(self._lags, w, self._clamp)
        self._weights, self._lags = [], {}
        return stats

    def _state(self) -> dict[str, Any]:
        # The LM head too, even when tied, or the engine keeps a stale one.
        return {k: v.detach().to(self._publish_dtype).contiguous().clone()
                for k, v in self.model.state_dict().items()}

    def export(self) -> bytes:
        """The weights as safetensors bytes (for an engine on another node)."""
        from safetensors.torch import save

        return save(self._state())

    def save(self) -> str:
        """The weights as a checkpoint folder (for an engine on this machine);
        keeps the last two."""
        from safetensors.torch import save_file

        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="rolloutbench-weights-")
        path = Path(self._dir) / f"v{self.version}"
        path.mkdir(parents=True, exist_ok=True)
        save_file(self._state(), str(path / "model.safetensors"))
        for name in ("config.json", "generation_config.json"):  # a loadable folder
            if (Path(self._model_dir) / name).exists():
                shutil.copy(Path(self._model_dir) / name, path / name)
        shutil.rmtree(Path(self._dir) / f"v{self.version - 2}", ignore_errors=True)
        return str(path)


class Calls(Protocol):
    """Where the learner runs: `await calls.call("backward", samples)`."""

    async def call(self, method: str, *args: Any) -> Any: ...


class InThread:
    """The learner in this process, its compute in a worker thread so the
    engine keeps generating meanwhile."""

    def __init__(self, learner: GRPOLearner) -> None:
        self.learner = learner

    async def call(self, method: str, *args: Any) -> Any:
        return await asyncio.to_thread(getattr(self.learner, method), *args)


class LiveTrainer:
    """Implements `harness.core.runtime.Trainer` over a learner reached by `calls`.
    `publish_with` names the learner method that hands weights over: 'save'
    (a folder, same machine) or 'export' (bytes, any node)."""

    gpus = 1

    def __init__(self, calls: Calls, engine: Any, emit: Callable[..., Any],
                 prompt_ids: Callable[[Request], list[int]], publish_with: str = "save") -> None:
        self._calls = calls
        self._engine = engine
        self._emit = emit
        self._prompt_ids = prompt_ids
        self._publish_with = publish_with
        self.lock = asyncio.Lock()
        self.version = 0
        self._step = 0

    def _samples(self, groups: Sequence[Group]) -> list[Sample]:
        return [Sample(self._prompt_ids(r.request), list(r.token_ids or []),
                       list(r.logprobs or []), float(adv), [list(s) for s in r.version_spans])
                for g in groups for r, adv in zip(g.responses, g.advantages, strict=True)]

    async def train(self, batch: int, groups: Sequence[Group], gpus: int | None = None) -> None:
        async with self.lock:
            samples = self._samples(groups)
            self._emit("train_start", batch=batch, micro_batches=len(passes(samples)),
                       samples=len(samples), gpus=1)
            tokens = await self._calls.call("backward", samples)
            self._emit("train_end", batch=batch, tokens=tokens)

    async def step(self) -> int:
        async with self.lock:
            stats = await self._calls.call("apply")
            self._step += 1
            self.version += 1
            self._emit("optimizer_step", step=self._step, version=self.version, **stats)
            return self.version

    async def publish(self, in_flight: bool = False, recompute: bool = False,
                      drafter: int | None = None, relay: bool = False) -> None:
        """`drafter` is not sent: the live engines do not speculate (no drafter to
        update), so a system's drafter version changes nothing here. `relay` (Laminar's
        relay tier) is an in-flight install here: one live engine, no relay workers
        (`LiveEngine.pull` says so once in the trace)."""
        in_flight = in_flight or relay
        weights = await self._calls.call(self._publish_with)
        await self._engine.install(self.version, weights, recompute=recompute)
        said = {"recompute": True} if recompute else {}  # traces without it stay as they were
        self._emit("weights_published", version=self.version, in_flight=in_flight, **said)
