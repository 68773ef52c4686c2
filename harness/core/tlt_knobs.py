"""TLT's knobs (system `tlt`, systems/tlt.py): the `[tlt]` table.

TLT (arXiv 2511.16665) is synchronous and on-policy, so it has no staleness knob; its
knobs are its adaptive rollout engine's batch threshold and its drafter's training
schedule, under the names of mit-han-lab/fastrl@bce3df7a's
verl/trainer/config/fastrl_trainer.yaml (cited as yaml:LINE)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.fields import need, opt


@dataclass
class TLT:
    """TLT's adaptive rollout engine and adaptive drafter (systems/tlt.py has each rule)."""

    bs_threshold: int = opt(32, "speculate only while a replica runs at most this many "
                            "sequences (speculative.bs_threshold, yaml:9; sets "
                            "sim.spec_max_batch when that is 0; 0: at every batch)")
    training_interval_steps: int = opt(10, "the drafter is trained every this many steps "
                                       "(speculative.train.training_interval_steps, "
                                       "yaml:20): data collected one step before, trained "
                                       "in the next rollout's tail")
    drafter_steps: int = opt(100, "drafter training steps a session needs for the drafter "
                             "to match the policy it was trained on, fewer moving it a "
                             "share of the way (100: the most a session runs, "
                             "worker_manager.py:723-744; a reading)")
    drafter_step_s: float = opt(0.2, "seconds a drafter training step takes on a replica "
                                "idle in the tail (an estimate: a one-layer drafter of a "
                                "7B model over 2 x 8192 tokens, yaml:21-22, on an H100, "
                                "and the loop's 0.02 s sleep)")

    def check(self, cfg: Any) -> None:
        """Refuse what TLT's loop cannot run: a zero interval divides by zero
        (worker_manager.py:487), a negative threshold or step count means nothing."""
        need(self.bs_threshold >= 0, "set tlt.bs_threshold",
             f"must be >= 0 (0: speculate at every batch), not {self.bs_threshold}")
        need(self.training_interval_steps >= 1, "set tlt.training_interval_steps",
             f"must be >= 1, not {self.training_interval_steps}")
        need(self.drafter_steps >= 0, "set tlt.drafter_steps",
             f"must be >= 0, not {self.drafter_steps}")
        need(self.drafter_step_s >= 0, "set tlt.drafter_step_s",
             f"must be >= 0, not {self.drafter_step_s}")
