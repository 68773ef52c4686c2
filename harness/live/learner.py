"""The trainer's compute half for `live.trainer`, built in this process or in the
trainer node's actor."""

from __future__ import annotations

from typing import Any

from harness.core.config import RunConfig


def make_learner(cfg: RunConfig) -> Any:
    """The trainer's compute half for `live.trainer`."""
    if cfg.live.trainer == "megatron":
        from harness.live.megatron import MegatronLearner

        return MegatronLearner.from_config(cfg)
    from harness.live.trainer import GRPOLearner

    live = cfg.live
    return GRPOLearner(live.model_dir, lr=live.lr, clamp=cfg.clamp, seed=cfg.seed)
