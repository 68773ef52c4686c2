"""The live trainer: GRPO on a Hugging Face causal LM with torch.

Per sample, the loss is token-level importance-weighted policy gradient,

    - sum_t min(w_t, clamp) * A * log pi(y_t)    with w_t = exp(log pi(y_t) - log mu(y_t)),

where mu's log-probs are the engine's (the behaviour policy, as sampled) and A
the group-normalised advantage; gradients accumulate over `train` calls and
`step` applies them. The w_t of a step give its ESS (PipelineRL Eq. 6), so live
ESS is measured, not modelled; on-policy it sits a little below 1 from the
numerical gap between engine (bf16) and trainer (fp32).

Compute runs in a worker thread so the engine keeps generating meanwhile.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness.offpolicy import lag_histogram, measured_stats
from harness.runtime import Group, Request


class TorchTrainer:
    """Implements `harness.runtime.Trainer` for one CPU process."""

    gpus = 1

    def __init__(self, model_dir: str, engine: Any, emit: Callable[..., Any],
                 prompt_ids: Callable[[Request], list[int]], lr: float = 1e-4,
                 clamp: float = 5.0, seed: int = 0) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        torch.manual_seed(seed)
        self._torch = torch
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        self.model.train()
        self._opt = torch.optim.AdamW(self.model.parameters(), lr=lr)
        self._engine = engine
        self._emit = emit
        self._prompt_ids = prompt_ids
        self._clamp = clamp
        self.lock = asyncio.Lock()
        self.version = 0
        self._step = 0
        self._weights: list[np.ndarray] = []
        self._lags: dict[int, int] = {}
        self._weights_dir = tempfile.mkdtemp(prefix="rolloutbench-weights-")

    async def train(self, batch: int, groups: Sequence[Group], gpus: int | None = None) -> None:
        async with self.lock:
            self._emit("train_start", batch=batch, micro=sum(len(g.responses) for g in groups),
                       gpus=1)
            tokens = await asyncio.to_thread(self._backward, list(groups))
            self._emit("train_end", batch=batch, tokens=tokens)

    def _backward(self, groups: list[Group]) -> int:
        torch = self._torch
        total = sum(len(r.token_ids or []) for g in groups for r in g.responses) or 1
        for group in groups:
            for resp, adv in zip(group.responses, group.advantages, strict=True):
                ids = resp.token_ids or []
                if not ids:
                    continue
                prompt = self._prompt_ids(resp.request)
                x = torch.tensor([prompt + ids])
                logits = self.model(x).logits[0, len(prompt) - 1 : -1].float()
                logp = torch.log_softmax(logits, dim=-1).gather(
                    1, torch.tensor(ids)[:, None])[:, 0]
                behaviour = torch.tensor(resp.logprobs or [float("nan")] * len(ids))
                w = torch.exp(logp.detach() - behaviour)
                w = torch.nan_to_num(w, nan=1.0)
                loss = -(torch.clamp(w, max=self._clamp) * adv * logp).sum() / total
                loss.backward()
                self._weights.append(w.numpy().copy())
                for lag, n in lag_histogram(resp.version_spans, self.version).items():
                    self._lags[lag] = self._lags.get(lag, 0) + n
        return total

    async def step(self) -> int:
        async with self.lock:
            await asyncio.to_thread(self._apply)
            self._step += 1
            self.version += 1
            w = np.concatenate(self._weights) if self._weights else np.array([])
            stats = measured_stats(self._lags, w, self._clamp)
            self._weights, self._lags = [], {}
            self._emit("optimizer_step", step=self._step, version=self.version, **stats)
            return self.version

    def _apply(self) -> None:
        self._torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self._opt.step()
        self._opt.zero_grad(set_to_none=True)

    async def publish(self, in_flight: bool = False) -> None:
        """Write the weights as a safetensors checkpoint (the LM head too, even when
        tied, or the engine keeps a stale one) and have the engine load it."""
        path = Path(self._weights_dir) / f"v{self.version}"
        await asyncio.to_thread(self._save, path)
        await self._engine.install(self.version, str(path))
        self._emit("weights_published", version=self.version, in_flight=in_flight)

    def _save(self, path: Path) -> None:
        from safetensors.torch import save_file

        path.mkdir(parents=True, exist_ok=True)
        torch = self._torch
        state = {k: v.detach().to(torch.bfloat16).contiguous().clone()
                 for k, v in self.model.state_dict().items()}
        save_file(state, str(path / "model.safetensors"))
        old = path.parent / f"v{self.version - 2}"  # keep the last two
        if old.exists():
            shutil.rmtree(old, ignore_errors=True)
