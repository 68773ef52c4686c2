"""verl's dynamic-scheduling policies: when the trainer's GPUs become rollout replicas.

Written from verl-project/verl@1dda039 (cited as verl@1dda039), the files of
verl/experimental/fully_async_policy/dynamic_schedule/ (cited as ds/). Pure rules over
counts and seconds, no runtime, so each is tested by hand (tests/test_verl_dynamic.py).
Counts are verl "samples", groups here (systems/verl_fully_async.py says why).

- `should_deactivate`: whenever the hybrid replicas are active (default_policy.py:80-81,
  fixed_ratio_policy.py:45-46, static_fully_async: ds/README.md:149).
- `deactivate_wait_samples`: int(ratio x step_required_samples) (default_policy.py:83-84,
  fixed_ratio_policy.py:48-49; step_required = required x trigger, base.py:105-106);
  static_fully_async waits for none (ds/README.md:150).
- `should_activate_after_step`: a positive gap, gap = ratio x step_required - (generated
  - expected) (default_policy.py:132-140, 205-207; fixed_ratio_policy.py:73); default adds
  the switch-cost gate (:163-189, 209): gap x per-sample seconds > switch cost, the
  per-sample seconds the cycle's collection waits over its waited samples (:142-161,
  1000 s before any signal: :33), the cost the mean of the last 3 measured lend + reclaim
  seconds (:86-90, 96-98), 10 s before any (:21). static_fully_async never activates.
- `update_after_step` (default only, from the first sync on: :92-117): a cycle with
  waited samples raises the ratio by clip(waited / step_required, 0.02, 0.1), capped at
  1; one without lowers it by 0.02, with no floor (a ratio at or below 0 makes the wait
  before a reclaim zero).
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_SWITCH_THRESHOLD_S = 10.0  # default_policy.py:21
SWITCH_OVERHEAD_WINDOW_SIZE = 3  # :22
RATIO_INCREASE_MIN, RATIO_INCREASE_MAX, RATIO_DECREASE = 0.02, 0.1, 0.02  # :26-28
INITIAL_PER_SAMPLE_TIME_S = 1000.0  # :33


@dataclass
class Context:
    """verl's DynamicScheduleContext (base.py:56-106): the run's constants and the last
    cycle's signals, as fully_async_trainer.py:708-722 fills them at a sync."""

    required_samples: int  # groups per collection: U x require_batches
    trigger: int  # collections per sync
    total_generated: int = 0  # groups ever queued (fully_async_rollouter.py:1010-1012)
    expected: int = 0  # step_required x completed steps (fully_async_trainer.py:711)
    wait_times: list[float] = field(default_factory=list)  # per collection, seconds
    wait_samples: list[int] = field(default_factory=list)  # per collection, not queued yet
    activate_s: float = 0.0  # this cycle's lend seconds (fully_async_trainer.py:754)
    deactivate_s: float = 0.0  # this cycle's reclaim seconds (:572)

    @property
    def step_required(self) -> int:
        return self.required_samples * self.trigger


class Policy:
    """One of verl's three built-in policies, by name (the config refuses others:
    harness/core/async_knobs.py DYNAMIC_POLICIES), with its state."""

    def __init__(self, name: str, deactivate_ratio: float) -> None:
        self.name = name
        self.ratio = deactivate_ratio
        self.switches: list[float] = []  # measured lend + reclaim seconds, per cycle
        self.per_sample_s = INITIAL_PER_SAMPLE_TIME_S

    def deactivate_wait(self, ctx: Context) -> int:
        """Groups the queue must hold before the lent replicas are reclaimed."""
        if self.name == "static_fully_async":
            return 0
        return int(ctx.step_required * self.ratio)

    def gap(self, ctx: Context) -> float:
        """Groups short of the reclaim threshold (default_policy.py:132-140)."""
        return self.ratio * ctx.step_required - (ctx.total_generated - ctx.expected)

    def switch_cost(self) -> float:
        """Mean of the last three measured switches, 10 s before any (:86-90)."""
        if not self.switches:
            return DEFAULT_SWITCH_THRESHOLD_S
        recent = self.switches[-SWITCH_OVERHEAD_WINDOW_SIZE:]
        return sum(recent) / len(recent)

    def estimate_per_sample(self, ctx: Context) -> float:
        """Seconds one waited group took, kept from the last cycle that waited (:142-161)."""
        wait, waited = sum(ctx.wait_times), sum(ctx.wait_samples)
        if wait > 0 and waited > 0:
            self.per_sample_s = wait / waited
        return self.per_sample_s

    def benefit(self, ctx: Context) -> float:
        """The gate's net benefit, seconds: gap x per-sample seconds - switch cost."""
        return max(0.0, self.gap(ctx)) * self.estimate_per_sample(ctx) - self.switch_cost()

    def should_activate(self, ctx: Context) -> bool:
        """Lend after this sync? (default_policy.py:191-209; fixed_ratio_policy.py:60-73)"""
        if self.name == "static_fully_async" or self.gap(ctx) <= 0:
            return False
        return self.name == "fixed_ratio" or self.benefit(ctx) > 0

    def update(self, version: int, ctx: Context) -> None:
        """After the sync: record the cycle's switch and adapt the ratio (default)."""
        if self.name != "default" or version <= 0:
            return
        overhead = ctx.activate_s + ctx.deactivate_s
        if overhead > 0:
            self.switches.append(overhead)
        waited = sum(ctx.wait_samples)
        if waited > 0:
            raw = waited / ctx.step_required if ctx.step_required > 0 else RATIO_INCREASE_MAX
            self.ratio = min(1.0, self.ratio + min(RATIO_INCREASE_MAX,
                                                   max(RATIO_INCREASE_MIN, raw)))
        else:
            self.ratio -= RATIO_DECREASE
