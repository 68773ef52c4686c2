"""verl's dynamic resource scheduling: verl-fully-async whose trainer GPUs serve rollout
as hybrid replicas while the trainer waits for samples, and are taken back to train.

Written from verl-project/verl@1dda039 (verl/experimental/fully_async_policy/, cited as
verl@1dda039; its dynamic_schedule/ folder as ds/; PR #6556). In verl it is one switch
of the fully-async trainer, `use_dynamic_resource_scheduling` (config/
fully_async_ppo_trainer.yaml:32, off by default), whose `static_fully_async` policy is
plain fully-async (ds/README.md:155-157): so this is `VerlFullyAsync` with two hooks
filled, a system of its own only so that it is listed, compared and planned by name.

Per trainer step (fully_async_trainer.py:559-594), and per sync (:708-781):
- Reclaim (before the trainer takes its groups, when lent: :561-578): wait until the
  queue holds `deactivate_wait` groups (rollouter's wait_for_enough_samples, :1344-1378),
  then `engine.reclaim()`: out of the router, requests aborted and sent on to the
  standing replicas from their tokens, the replicas asleep (dynamic_resource_controller.
  py:138-160). Its seconds are the cycle's deactivate duration (:569-572).
- A collection's signal (:389-399, 447-451): its wait, and the groups not yet queued
  when it began.
- At a sync, before the weights go out (:708-727): generated groups, expected groups
  (step_required x completed steps; the rollouter's completed steps start at 1 and count
  each sync that saw a group queued, fully_async_rollouter.py:446, 618-620), and the
  policy's decision (systems/verl_dynamic_policy.py). After the standalone sync
  (:733-736), a lend when decided (:740-754): `engine.lend()` prices the same-GPU weight
  sync and the wake (sync_hybrid_weights, activate_hybrid_replicas: controller :97-136)
  and rebalances when asked (`enable_rebalance`, :747-752; rollouter :1211-1272). Then
  the policy updates and the cycle's signals reset (:769-781). The rollouter's
  concurrency follows the replicas taking requests (rollouter :1199-1209, 1274-1294).

The hybrid replicas start asleep (fully_async_trainer.py:281-296, controller :78), so
the first lend comes at the first sync. A run that ends lent takes its GPUs back.
"""

from __future__ import annotations

from typing import Any

from harness.core.runtime import Runtime
from systems.verl_dynamic_policy import Context, Policy
from systems.verl_fully_async import Loop, VerlFullyAsync, max_required_samples


class VerlDynamic(VerlFullyAsync):
    name = "verl-dynamic"
    summary = "verl-fully-async whose trainer GPUs serve rollout while it waits for samples"
    knobs: tuple[str, ...] = (*VerlFullyAsync.knobs, "verl_dynamic.policy",
                              "verl_dynamic.deactivate_ratio", "verl_dynamic.enable_rebalance",
                              "verl_dynamic.hybrid_memory_fraction")
    placements = ("disaggregated",)
    placement_why = ("hybrid replicas run on the trainer's own GPUs beside standalone ones, "
                     "verl@1dda039:verl/experimental/fully_async_policy/dynamic_schedule/"
                     "README.md:27-28")

    @staticmethod
    def plan_knobs(plan: Any) -> dict[str, list[Any]]:
        """What `plan` tries: verl-fully-async's staleness shares (plan's ASYNC_STALENESS),
        the policy with and without the switch-cost gate, and the reclaim's share, verl's
        0.3 and its benchmark's 0.6 (verl@1dda039:verl/experimental/fully_async_policy/
        dynamic_schedule/README.md:331)."""
        return {"verl_async.staleness_threshold": [0.0, 0.1, 0.3, 0.5],
                "verl_dynamic.policy": ["default", "fixed_ratio"],
                "verl_dynamic.deactivate_ratio": [0.3, 0.6]}

    def __init__(self) -> None:
        super().__init__()
        self.policy: Policy | None = None
        self.ctx = Context(1, 1)
        self.lent = False
        self.activate = False
        self.syncs = 0  # the trainer's parameter version (global_steps)
        self.completed = 1  # the rollouter's completed steps (rollouter :446)
        self.queued_at_reset = 0

    async def run(self, rt: Runtime) -> None:
        cfg, d = rt.config, rt.config.verl_dynamic
        self.policy = Policy(d.policy, d.deactivate_ratio)
        self.ctx = Context(cfg.update_groups * cfg.verl_async.require_batches,
                           cfg.verl_async.trigger_parameter_sync_step)
        await super().run(rt)
        if self.lent:
            await rt.engine.reclaim()

    def _concurrency(self, rt: Runtime, loop: Loop) -> None:
        """max_concurrent_samples for the replicas now taking requests."""
        v = rt.config.verl_async
        loop.state["concurrency"] = min(rt.engine.replicas * v.concurrent_samples_per_replica,
                                        max_required_samples(rt.config))
        loop.changed.set()

    async def before_fit(self, rt: Runtime, loop: Loop) -> None:
        if not self.lent or self.policy is None:
            return
        # verl's dataset runs on for epochs; a run here ends at its last group, so the wait
        # is for no more groups than are still to be trained
        taken = loop.state["queued"] - len(loop.queue)
        cfg = rt.config
        need = min(self.policy.deactivate_wait(self.ctx), cfg.rounds * cfg.groups - taken)
        while len(loop.queue) < need:
            await loop.wait()
        start = rt.now()
        moved = await rt.engine.reclaim()
        self.lent = False
        self.ctx.deactivate_s += rt.now() - start
        self._concurrency(rt, loop)
        rt.emit("decision", what="hybrid_reclaim", queued=len(loop.queue), threshold=need,
                moved=moved)

    def collected(self, wait_s: float, waited: int) -> None:
        self.ctx.wait_times.append(wait_s)
        self.ctx.wait_samples.append(waited)

    async def before_sync(self, rt: Runtime, loop: Loop) -> None:
        assert self.policy is not None
        self.syncs += 1
        ctx = self.ctx
        ctx.total_generated = loop.state["queued"]
        ctx.expected = ctx.step_required * self.completed
        self.activate = self.policy.should_activate(ctx)
        rt.emit("decision", what="hybrid_gate", lend=self.activate, ratio=self.policy.ratio,
                gap=self.policy.gap(ctx), generated=ctx.total_generated,
                expected=ctx.expected, switch_cost_s=self.policy.switch_cost(),
                per_sample_s=self.policy.per_sample_s)

    async def after_sync(self, rt: Runtime, loop: Loop) -> None:
        assert self.policy is not None
        d, ctx = rt.config.verl_dynamic, self.ctx
        if self.activate and not self.lent:
            start = rt.now()
            self.lent = await rt.engine.lend(d.hybrid_memory_fraction, d.enable_rebalance) > 0
            ctx.activate_s += rt.now() - start
            self._concurrency(rt, loop)
        if loop.state["queued"] > self.queued_at_reset:  # reset_staleness (rollouter :618)
            self.completed += 1
        self.queued_at_reset = loop.state["queued"]
        self.policy.update(self.syncs, ctx)
        ctx.activate_s = ctx.deactivate_s = 0.0
        ctx.wait_times, ctx.wait_samples = [], []

    @staticmethod
    def staleness_bound(cfg: Any) -> int | None:
        """verl-fully-async's: a lend or reclaim moves requests within one version, and
        the weights still change only at a sync."""
        return VerlFullyAsync.staleness_bound(cfg)
