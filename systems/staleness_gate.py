"""The capacity gate AReaL and SkyRL share: admission by version arithmetic.

Both bound how far generation may run ahead of training by one inequality over
global counters, so the code is shared:

    capacity = min(max_concurrent - running,
                   (max_staleness + version + 1) x batch - (accepted + running))

with `version` the optimizer steps completed, `accepted` the groups finished so
far (trained or waiting), `running` the groups being generated and `batch` the
groups one step consumes. A new group may start while capacity > 0.

- AReaL: inclusionAI/AReaL@4aef98d:areal/infra/staleness_manager.py:103-112
  (`(ofp + current_version + 1) * consumer_bs - sample_cnt`).
- SkyRL: NovaSky-AI/SkyRL@a956457:skyrl/train/fully_async_trainer.py:181-187
  (`(max_staleness_steps + current_global_step) * mini_batch_size`, its
  `current_global_step` being the step being worked on, completed steps + 1:
  the docstring of :182-183 says the two formulas are the same), "modeled after
  AReal's StalenessManager" (:133).

The gate bounds the aggregate, not each group: a group still running while
later ones finish and are trained may lag past `max_staleness` (SkyRL says so:
docs/content/docs/tutorials/fully_async.mdx:271).

What it does bound is the backlog (`backlog_bound`, which `rolloutbench check` holds a
trace to): after `version` steps, version x batch groups have been trained, so the
groups accepted but untrained plus those running number at most (max_staleness + 1) x
batch, and their finished samples at most that times K. AReaL says the same of its
intent (staleness_manager.py:119-121: "the intended (max_staleness + 1) *
batch_size"), and areal-project/AReaL#1388 is what breaking it looks like: a resumed
run's `accepted` restarted at 0 while the version was restored, and the burst of
admissions that followed overshot this bound.
"""

from __future__ import annotations

import math


class CapacityGate:
    """The counters and the capacity inequality (groups, not samples). `max_staleness`
    may be fractional (ROLL's async_generation_ratio): a group may start while accepted
    + running < (max_staleness + version + 1) x batch, that is while it is below
    ceil(max_staleness x batch) + (version + 1) x batch, ROLL's budget
    (alibaba/ROLL@8eb27cc2:roll/distributed/scheduler/generate_scheduler.py:236-239)."""

    def __init__(self, max_concurrent: int, batch: int, max_staleness: float) -> None:
        self.max_concurrent = max_concurrent
        self.batch = batch
        self.max_staleness = max_staleness
        self.accepted = 0  # finished generating: trained, or waiting to be
        self.running = 0

    def capacity(self, version: int) -> int:
        """New groups that may start while the trainer has completed `version` steps."""
        ahead = math.ceil(self.max_staleness * self.batch)  # ROLL's order of arithmetic
        by_staleness = ahead + (version + 1) * self.batch - (self.accepted + self.running)
        return min(self.max_concurrent - self.running, by_staleness)

    def submit(self) -> None:
        self.running += 1

    def accept(self) -> None:
        """A group finished generating: from running to accepted."""
        self.running -= 1
        self.accepted += 1

    def drop(self) -> None:
        """A running group given up before it finished: it no longer counts, so its place
        is free again (ROLL's ReplayBuffer._abort_prompt, which roll-flash shares this
        gate for: alibaba/ROLL@8eb27cc2:roll/distributed/scheduler/generate_scheduler.py:
        319-324)."""
        self.running -= 1


def backlog_bound(max_staleness: int, batch: int, group_size: int) -> int:
    """The most finished, untrained samples the gate allows: (max_staleness + 1) x
    batch groups, K samples each (see above)."""
    return (max_staleness + 1) * batch * group_size
