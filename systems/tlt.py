"""TLT: adaptive speculative rollouts with a drafter trained in the tail (arXiv 2511.16665).

Source: Hu et al., "Taming the Long Tail" (MIT Han lab), code mit-han-lab/fastrl@bce3df7a
(cited as FILE:LINE below; yaml is verl/trainer/config/fastrl_trainer.yaml, sglang is
third-party/sglang/python/sglang/srt). TLT keeps synchronous on-policy GRPO (its
speculation is lossless), which is Slime's round (systems/slime.py); docs/systems.md
("TLT") says which rules are readings.

- Adaptive rollout engine: a replica speculates only once its running batch is at most
  `bs_threshold` (32: yaml:9, examples/grpo_7B.sh:28), checked at each decode batch
  (sglang/speculative/eagle_worker.py:361, managers/scheduler.py:2214-2217). Here:
  `sim.spec_max_batch` (set from `tlt.bs_threshold` by `paper_defaults`), the engine pricing
  a segment of a larger batch as plain steps. Left out: the 10 consecutive qualifying
  batches before it turns on and its staying on after (eagle_worker.py:196, 348-371), and
  the re-prefill of the running requests when it turns on.
- Its strategy: EAGLE trees of depth 8, top-k 4 (yaml:12-13), the verified tokens chosen
  by batch size by the BEG bandit over the configs 8_4_{48,32,16,8} (yaml:14-17,
  eagle_worker.py:1254-1258): one config a bucket, so the choice is fixed, 48 tokens at
  batch 1, 32 at 2-4, 16 at 5-20, 8 from 21 (sglang/speculative/eagle_mab.py:250-274).
  Not modelled: the engine drafts a chain of `sim.spec_tokens` (harness/sim/speculative.py).
- Adaptive drafter: a one-layer EAGLE drafter (`sim.spec_drafter` mtp unless set: one
  decoder layer sharing the policy's embedding and head). Its data is collected at the step
  before a training step ((global_steps + 1) % training_interval_steps == 0,
  verl/trainer/ppo/ray_trainer.py:1213; global_steps is the round + 1, ray_trainer.py:1060,
  1083); it is trained in the tail of the next rollout, on the first replica that finishes
  and releases its memory (min_workers_for_training 1, yaml:25; sglang_rollout.py:1018-1029;
  worker_manager.py:256-260), until the rollout's generation ends (worker_manager.py:216)
  or its loop's cap (worker_manager.py:723-748); its weights go to the engines with the
  policy's at the next sync (verl/workers/sharding_manager/fsdp_sglang.py:236-260).
  Here: the tail is timed from the response after which a replica has nothing running or
  waiting (`EngineLoad.idle`, the simulator's pool counts them) to the last response. A
  session that fits `drafter_steps` steps of `drafter_step_s` makes the drafter match the
  policy that generated its data; a shorter one moves it its share of the way (a reading:
  TLT pushes whatever the session trained). Acceptance at a rollout is then
  sim.spec_acceptance x (1 - decay)^lag, lag the versions the policy is past the drafter
  (the `drafter` decision each round says it).
"""

from __future__ import annotations

from typing import Any

from harness.core.runtime import Group, Response, Runtime
from systems.common import new_groups
from systems.slime import Slime


class TLT(Slime):
    name = "tlt"
    summary = "synchronous, speculative in the tail; its drafter retrained on a replica idle there"
    speculates = True  # `run --set sim.spec_drafter=off` is refused (harness/run/knob_check)
    knobs: tuple[str, ...] = ("update_groups", "tlt.bs_threshold",
                              "tlt.training_interval_steps", "tlt.drafter_steps",
                              "tlt.drafter_step_s")

    @staticmethod
    def paper_defaults(cfg: Any) -> None:
        """TLT always speculates on the simulator: a one-layer drafter (mtp) unless one is
        set, and its batch threshold unless `sim.spec_max_batch` is (the trace header shows
        both). A live engine drafts nothing, so a live run's header says none."""
        if cfg.runtime != "sim":
            return
        if cfg.sim.spec_drafter == "off":
            cfg.sim.spec_drafter = "mtp"
        if cfg.sim.spec_max_batch == 0:
            cfg.sim.spec_max_batch = cfg.tlt.bs_threshold

    @staticmethod
    def plan_knobs(plan: Any) -> dict[str, list[Any]]:
        """`rolloutbench plan` tries the threshold (0: speculate always) and the interval
        (1: every step, which the README advises against, README.md:109)."""
        return {"tlt.bs_threshold": [0, 32], "tlt.training_interval_steps": [1, 10]}

    def __init__(self) -> None:
        super().__init__()
        self.drafter = 0  # the policy version the engines' drafter matches (trained on v0)
        self.data: int | None = None  # the version whose rollout was collected to train on

    async def rollout_tail(self, rt: Runtime, groups: list[Group]) -> float:
        """Slime's rollout; returns the seconds from the response after which a replica
        has nothing left (TLT's first release) to the last response (0: none, or the
        engine does not say which replicas are idle)."""
        marks = {"idle": -1.0, "last": 0.0}

        def told(response: Response) -> None:
            marks["last"] = now = rt.now()
            if marks["idle"] < 0 and rt.engine.load().idle >= 1:
                marks["idle"] = now

        await rt.gather(*(rt.serve(g, on_response=told) for g in groups))
        return marks["last"] - marks["idle"] if marks["idle"] >= 0 else 0.0

    def train_drafter(self, rt: Runtime, rnd: int, tail: float) -> None:
        """A session of the steps that fit in the tail (at most `drafter_steps`) moves the
        drafter that share of the way from its version to its data's, rounded down."""
        knobs, data = rt.config.tlt, self.data or 0
        need, each = knobs.drafter_steps, knobs.drafter_step_s
        steps = need if each == 0 else min(need, int(tail / each))
        if steps >= need:
            self.drafter = data
        else:
            self.drafter += (data - self.drafter) * steps // need
        rt.emit("decision", what="drafter_train", round=rnd, tail_s=round(tail, 6),
                steps=steps, drafter=self.drafter)
        self.data = None

    async def run(self, rt: Runtime) -> None:
        cfg, knobs = rt.config, rt.config.tlt
        for rnd in range(cfg.rounds):
            version = rt.engine.version
            rt.emit("rollout_start", round=rnd, version=version)
            rt.emit("decision", what="drafter", round=rnd, drafter=self.drafter,
                    lag=version - self.drafter)
            groups = new_groups(rt, rnd, rt.workload.take(cfg.groups))
            tail = await self.rollout_tail(rt, groups)
            rt.emit("rollout_complete", round=rnd)
            if self.data is not None:  # trained in this rollout's tail
                self.train_drafter(rt, rnd, tail)
            if (rnd + 2) % knobs.training_interval_steps == 0:  # (global_steps + 1) % I
                self.data = version
            for i in range(0, len(groups), cfg.update_groups):
                await self.batches.train(rt, groups[i : i + cfg.update_groups])
            await rt.trainer.publish(drafter=self.drafter)
