"""prime-rl's adaptive in-flight concurrency controller (AIMD), on the runtime contract.

From PrimeIntellect-ai/prime-rl@559b447:src/prime_rl/orchestrator/concurrency.py
(described in docs/inference.md:207-217); constants and rules by line:

- Grow: each completed episode advances the turnover by 1/inflight and, while the
  last poll read clear (no waiting queue, KV use <= 0.6, no drain) within its
  15 s lifetime and inflight >= 0.9 x the cap, multiplies the cap by
  1.25^(1/inflight) (:41-48, :87, :166-187, :249-250).
- Signal per poll: preemptions since the last poll -> hard; a waiting queue two
  polls running -> soft; KV use > 0.6 -> soft; waiting > 0.5 x running for 6
  polls -> hard (:65-69, :205-228).
- Cut on preemptions or a persistent queue: to 0.8 (preemptions) or 0.9 (queue)
  of inflight, 0.5 when escalated, cancelling the excess, then no further cut
  until inflight is back under the cap (:264-279, :231-247).
- Trim above KV use 0.8: to inflight x 0.7 / use, cancelling the excess only
  above 0.9; 6 polls between trims (:50-63, :281-290).
- The start: `initial_inflight` when set; else the floor until the first poll that
  reports the engines' KV capacity, which sets the cap once to the pessimistic bound
  capacity / context length, clamped (:19-21, :124-126, :252-262; the context length
  is the engines' max_model_len, else the orchestrator's seq_len, orchestrator.py:379;
  docs/inference.md:217).
- The cap is clamped to [min_inflight, max_inflight] (:317-319).

Harness readings: the engines are polled every 5 s of the run's clock
(inference_metrics.py:17) through `Engine.load()`, one sample for the whole
engine (its KV use is the replicas' mean, where prime-rl takes the worst engine,
and it has no by-reason waiting count, so all waiting counts, as prime-rl does
without one, :218). The capacity is the replicas' KV-cache tokens summed, as prime-rl
sums its decode engines' (:321-324), and the context length the engine's `max_len`
(the simulator's: the workload's longest prompt plus the response cap), else
`fallback_cost` (the response cap); an engine that reports no capacity (the live ones)
leaves the cap at the floor, as prime-rl's would before its first report.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from harness.core.runtime import EngineLoad

GROWTH, BINDING = 1.25, 0.9
KV_GROW, KV_SOFT, KV_HARD, KV_TARGET = 0.6, 0.8, 0.9, 0.7
TRIM_COOLDOWN, QUEUE_RATIO, QUEUE_POLLS = 6, 0.5, 6
QUEUE_CUT, PREEMPTION_CUT, ESCALATED_CUT, GRACE_POLLS = 0.9, 0.8, 0.5, 6
GROWTH_TTL_S, POLL_S = 15.0, 5.0
SEVERITY = {"clear": 0, "soft": 1, "hard": 2}


class ConcurrencyController:
    """The cap on in-flight episodes; `set_limit` and `cancel` reach the dispatcher."""

    def __init__(self, initial: int, floor: int, ceiling: int, now: Callable[[], float],
                 get_inflight: Callable[[], int], cancel: Callable[[int], None],
                 fallback_cost: int = 0) -> None:
        self.floor, self.ceiling = floor, ceiling
        self.now, self.get_inflight, self.cancel = now, get_inflight, cancel
        self.fallback_cost = fallback_cost  # tokens an episode may take, without max_len
        self.cap = float(initial or floor)
        self.limit = int(self.clamp(self.cap))
        self.bootstrapped = bool(initial)  # a user-set start is kept
        self.turnover = 0.0
        self.can_grow, self.can_grow_until = False, 0.0
        self.prev_waiting = 0
        self.prev_preemptions = 0
        self.queue_polls = self.trim_cooldown = self.grace = 0
        self.draining = self.escalated = False

    def clamp(self, n: float) -> float:
        return min(max(n, float(self.floor)), float(self.ceiling or math.inf))

    def record_episode(self, tokens: int) -> None:
        """One episode completed (its permit already released)."""
        inflight = self.get_inflight() + 1
        fraction = 1 / inflight
        self.turnover += fraction
        if tokens <= 0:
            return
        if self.can_grow and self.now() < self.can_grow_until and inflight >= BINDING * self.limit:
            self.cap = self.clamp(self.cap * GROWTH ** fraction)
            self.limit = int(self.cap)

    def observe(self, load: EngineLoad) -> None:
        """One poll of the engine's load."""
        preempted = load.preemptions > self.prev_preemptions
        self.prev_preemptions = load.preemptions
        worst = "hard" if preempted else "clear"
        if load.waiting > 0 and self.prev_waiting > 0:
            worst = max(worst, "soft", key=SEVERITY.__getitem__)
        self.prev_waiting = load.waiting
        self.queue_polls = (self.queue_polls + 1 if load.running > 0
                            and load.waiting > QUEUE_RATIO * load.running else 0)
        queue_overload = self.queue_polls >= QUEUE_POLLS
        if queue_overload or load.kv_used > KV_GROW:
            worst = max(worst, "hard" if queue_overload else "soft", key=SEVERITY.__getitem__)
        inflight = self.get_inflight()
        if self.draining and inflight <= self.limit and not preempted and not queue_overload:
            self.draining = False
            self.grace = GRACE_POLLS
        if not self.draining and self.escalated:
            self.grace -= 1
            if self.grace <= 0:
                self.escalated = False
        self.trim_cooldown = max(0, self.trim_cooldown - 1)
        self.can_grow = worst == "clear" and load.waiting == 0 and not self.draining
        self.can_grow_until = self.now() + GROWTH_TTL_S
        cost = load.max_len or self.fallback_cost
        if not self.bootstrapped and load.kv_tokens > 0 and cost > 0:
            self.bootstrapped = True  # once: capacity / context length (:252-262)
            self.cap = self.clamp(load.kv_tokens / cost)
            self.limit = int(self.cap)
        if self.draining:
            return
        if preempted or queue_overload:
            fraction = ESCALATED_CUT if self.escalated else None
            if queue_overload:
                self.queue_polls = 0
            share = fraction or (QUEUE_CUT if queue_overload else PREEMPTION_CUT)
            self.resize_down(int(self.clamp(inflight * share)), inflight, cancel=True)
            self.draining = self.escalated = True
            return
        if load.kv_used > KV_SOFT and inflight > 0 and self.trim_cooldown == 0:
            target = int(self.clamp(inflight * KV_TARGET / load.kv_used))
            self.resize_down(target, inflight, cancel=load.kv_used > KV_HARD)
            self.trim_cooldown = TRIM_COOLDOWN

    def resize_down(self, target: int, inflight: int, cancel: bool) -> None:
        target = min(target, self.limit)
        self.cap = float(target)
        self.limit = target
        if cancel and inflight > target:
            self.cancel(inflight - target)
