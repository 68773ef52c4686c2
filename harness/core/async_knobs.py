"""The asynchronous systems' own knobs, one table each, under their sources' names.

Each table is a `[name]` table of a config file and `--set name.knob=value` on the
command line; a system lists the dotted names it reads in its `knobs`, so that
harness.run.knob_check refuses one set for a system that would ignore it. `check`
refuses a value the source would refuse, naming the option.

The defaults follow one rule (`DEFAULTS_RULE`; docs/systems.md has every knob's table):
each staleness or concurrency knob takes the setting its framework documents for an
asynchronous run, and its code default where the documentation sets none. The code
default, where it differs, is a reading one `--set` away; each field's help cites both.
Why not the other way round: tinker's code has no default (its bound is required),
SkyRL refuses its own default of 768 workers below U = 154, and AReaL's code default
is the synchronous mode its documentation keeps for debugging: the code defaults
cannot all run as asynchronous systems, the documented settings can.

The RL loop's shared shape stays in RunConfig and is the user's, not an example's: R
groups a round, K samples a group, U groups an optimizer step (every source's train
batch; verl's require_batches multiplies it), the rounds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.fields import need, opt

DEFAULTS_RULE = ("The asynchronous systems' knobs default to the setting their framework\n"
                 "documents for an asynchronous run; the code default, where it differs, is\n"
                 "one --set away (docs/systems.md, \"The asynchronous systems' defaults\").")


def _at_least(table: str, knobs: Any, low: int, *names: str) -> None:
    """Refuse each named knob below `low`, as `--set TABLE.NAME: must be >= LOW`."""
    for name in names:
        need(getattr(knobs, name) >= low, f"set {table}.{name}", f"must be >= {low}")


@dataclass
class AReaL:
    """inclusionAI/AReaL's staleness manager (system `areal`); inclusionAI/AReaL@4aef98d.
    Its consumer_batch_size is U (one rollout is one prompt's group of K)."""

    max_head_offpolicyness: int = opt(2, "most versions the trainer may run ahead of a "
                                      "group's admission: at most (this + version + 1) x U "
                                      "groups started; 2 as AReaL's math example "
                                      "(examples/math/gsm8k_grpo.yaml:28); code default 0, "
                                      "synchronous (areal/api/cli_args.py:2039-2041)")
    max_concurrent_rollouts: int | None = opt(256, "most groups in flight at once; 256 as "
                                              "AReaL's math example (gsm8k_grpo.yaml:25); "
                                              "0 or unset: U, the code default "
                                              "(cli_args.py:2024, workflow_executor.py:760)")

    def concurrent(self, cfg: Any) -> int:
        """The groups AReaL runs at once at this config (workflow_executor.py:760-761)."""
        return self.max_concurrent_rollouts or cfg.update_groups

    def check(self, cfg: Any) -> None:
        """Refuse values AReaL cannot run with: a negative offpolicyness never admits a
        rollout (staleness_manager.py:109)."""
        _at_least("areal", self, 0, "max_head_offpolicyness")
        need(self.max_concurrent_rollouts is None or self.max_concurrent_rollouts >= 0,
             "set areal.max_concurrent_rollouts", "must be >= 0 (0 or unset: U)")


@dataclass
class VerlAsync:
    """verl's fully-async policy trainer (system `verl-fully-async`); the defaults are
    verl-project/verl@1dda039:verl/experimental/fully_async_policy/config/
    fully_async_ppo_trainer.yaml's (cited below as yaml:LINE). verl's "sample" is one
    prompt with its rollout.n responses (detach_utils.py:70), so a count of samples
    here is a count of groups, and ppo_mini_batch_size is U groups."""

    staleness_threshold: float = opt(0.5, "most stale samples per parameter sync, as a "
                                     "share of the samples it trains; 0.5 as verl's docs "
                                     "run it (docs/advance/fully_async.md:352, 529); code "
                                     "default 0.1 (yaml:12); 0: synchronous")
    trigger_parameter_sync_step: int = opt(4, "trainer steps (each require_batches "
                                           "mini-batches) between parameter syncs "
                                           "(yaml:16)")
    require_batches: int = opt(1, "mini-batches of U groups the trainer takes from the "
                               "queue at once (yaml:19)")
    partial_rollout: bool = opt(True, "at a sync, resume the aborted responses under the "
                                "new weights (false: train them as cut) (yaml:23)")
    concurrent_samples_per_replica: int = opt(16, "groups in flight per engine replica "
                                              "(yaml:49)")

    def check(self, cfg: Any) -> None:
        """Refuse values verl would refuse (fully_async_rollouter.py:353-356), and a
        require_batches x U that does not divide R (a round is whole trainer steps)."""
        _at_least("verl_async", self, 0, "staleness_threshold")
        _at_least("verl_async", self, 1, "trigger_parameter_sync_step", "require_batches",
                  "concurrent_samples_per_replica")
        if cfg.system in ("verl-fully-async", "verl-dynamic"):
            batch = self.require_batches * cfg.update_groups
            need(cfg.groups % batch == 0, "set verl_async.require_batches",
                 f"require_batches x U = {batch} groups must divide R = {cfg.groups}, so "
                 f"that a round is whole trainer steps")


DYNAMIC_POLICIES = ("default", "fixed_ratio", "static_fully_async")


@dataclass
class VerlDynamic:
    """verl's dynamic resource scheduling over its fully-async trainer (system
    `verl-dynamic`): the trainer's GPUs serve rollout while it waits. Defaults are
    verl-project/verl@1dda039:verl/experimental/fully_async_policy/config/
    fully_async_ppo_trainer.yaml's (yaml:LINE) and verl/trainer/config/rollout/
    rollout.yaml's."""

    policy: str = opt("default", "when to lend the trainer's GPUs: default (adaptive ratio "
                      "and switch-cost gate), fixed_ratio (no gate, no adaptation) or "
                      "static_fully_async (never: verl-fully-async) (yaml:35)")
    deactivate_ratio: float = opt(0.3, "share of a sync's groups the queue holds before the "
                                  "lent GPUs go back to the trainer, in (0, 1] (yaml:42)")
    enable_rebalance: bool = opt(True, "at a lend, abort every request in flight and route "
                                 "it again least-loaded, from its tokens (yaml:46)")
    hybrid_memory_fraction: float = opt(0.5, "share of a trainer GPU's memory a lent replica "
                                        "takes, in (0, 1] (gpu_memory_utilization, "
                                        "rollout.yaml:46)")

    def check(self, cfg: Any) -> None:
        """Refuse a policy verl does not build (base.py:49-53) and shares outside (0, 1]
        (default_policy.py:64)."""
        need(self.policy in DYNAMIC_POLICIES, "set verl_dynamic.policy",
             f"{self.policy!r} is not one of {', '.join(DYNAMIC_POLICIES)}")
        for name in ("deactivate_ratio", "hybrid_memory_fraction"):
            need(0 < getattr(self, name) <= 1, f"set verl_dynamic.{name}", "must be in (0, 1]")


@dataclass
class SlimeAsync:
    """slime's fully-async example (system `slime-async`); THUDM/slime@624b824."""

    sglang_server_concurrency: int = opt(512, "groups the background worker keeps in flight, "
                                         "and samples generating at once, per engine "
                                         "(slime/backends/sglang_utils/arguments.py:47, "
                                         "default 512; fully_async_rollout.py:59)")
    update_weights_interval: int = opt(1, "rollouts between weight updates "
                                       "(slime/utils/arguments.py:537, default 1)")

    def check(self, cfg: Any) -> None:
        """Refuse values slime cannot run with."""
        _at_least("slime_async", self, 1, "sglang_server_concurrency",
                  "update_weights_interval")


@dataclass
class SkyRL:
    """SkyRL's fully-async trainer (system `skyrl-async`); NovaSky-AI/SkyRL@a956457."""

    max_staleness_steps: int = opt(4, "most steps between a group's scheduling and its "
                                   "training that the capacity gate aims for "
                                   "(skyrl/train/config/config.py:951, default 4)")
    num_parallel_generation_workers: int = opt(
        0, "generation workers, one group each; 0: U x (max_staleness_steps + 1), the "
        "value SkyRL's example scripts set (examples/train/fully_async/"
        "fully_async_run_gsm8k.sh:28; config.py:954's 768 fits U >= 154 only)")
    clear_kv_cache_on_weight_sync: bool = opt(False, "drop the KV cache of running "
                                              "sequences at each weight sync "
                                              "(config.py:963, default false)")

    def workers(self, cfg: Any) -> int:
        """The generation workers at this config (0 reads as the examples' value)."""
        return self.num_parallel_generation_workers or cfg.update_groups * (
            self.max_staleness_steps + 1)

    def check(self, cfg: Any) -> None:
        """Refuse values SkyRL would refuse (fully_async_trainer.py:353-363)."""
        _at_least("skyrl", self, 0, "max_staleness_steps", "num_parallel_generation_workers")
        u, w = cfg.update_groups, self.workers(cfg)
        need(u <= w <= u * (self.max_staleness_steps + 1),
             "set skyrl.num_parallel_generation_workers",
             f"must be within U = {u} and U x (max_staleness_steps + 1) = "
             f"{u * (self.max_staleness_steps + 1)}, as SkyRL requires")


@dataclass
class PrimeRL:
    """prime-rl's orchestrator (system `prime-rl`); PrimeIntellect-ai/prime-rl@559b447."""

    max_off_policy_steps: int = opt(8, "most steps a trained rollout may lag its dispatch "
                                    "version; older groups are cancelled and dropped "
                                    "(configs/orchestrator.py:532, default 8)")
    max_async_level: int = opt(1, "batches the orchestrator may ship ahead of the engines' "
                               "policy; fixed at 1 at 559b447 (orchestrator.py:104 "
                               "TARGET_LAG), a knob until e792f9cf8 (default 1, >= 0)")
    initial_inflight: int = opt(0, "in-flight episodes to start from; 0 (unset, the "
                                "default): at the first poll, the engines' KV-cache tokens "
                                "/ their context length, within [min, max] "
                                "(configs/orchestrator.py:428; concurrency.py:252-262)")
    min_inflight: int = opt(1, "fewest in-flight episodes (configs/orchestrator.py:431)")
    max_inflight: int = opt(1024, "most in-flight episodes (configs/orchestrator.py:434)")

    def check(self, cfg: Any) -> None:
        """Refuse values prime-rl would refuse (configs/orchestrator.py:428-444)."""
        _at_least("prime_rl", self, 0, "max_off_policy_steps", "max_async_level",
                  "initial_inflight")
        _at_least("prime_rl", self, 1, "min_inflight")
        for name in ("min_inflight", "initial_inflight"):
            need(getattr(self, name) <= self.max_inflight, f"set prime_rl.{name}",
                 "must not exceed prime_rl.max_inflight")


@dataclass
class NemoRL:
    """NeMo-RL's async GRPO (system `nemo-rl-async`); NVIDIA-NeMo/RL@7ea279a."""

    max_trajectory_age_steps: int = opt(1, "steps ahead the collector generates for, and the "
                                        "oldest generation version a step may train "
                                        "(examples/configs/grpo_math_1B.yaml:59, default 1)")
    in_flight_weight_updates: bool = opt(False, "update weights while generations run "
                                         "instead of draining them first "
                                         "(grpo_math_1B.yaml:64, default false)")
    recompute_kv_cache_after_weight_updates: bool = opt(
        False, "drop the KV cache after each weight update (grpo_math_1B.yaml:65, "
        "default false)")

    def check(self, cfg: Any) -> None:
        """Refuse values NeMo-RL would refuse."""
        need(self.max_trajectory_age_steps >= 1, "set nemo_rl.max_trajectory_age_steps",
             "must be >= 1 (the collector generates at least one step ahead)")


@dataclass
class Tinker:
    """tinker-cookbook's asynchronous RL loop (system `tinker`), as PR #822 rewrites it:
    thinking-machines-lab/tinker-cookbook@0d7fee56 (branch async-rl-blocking-staleness).
    Its groups_per_batch is U. The issue's `sampling_steps_ahead` is this PR's
    `pipeline_depth` (commit 1975ad25 split it from the bound)."""

    max_steps_off_policy: int = opt(4, "hard staleness bound: a group sampled at version s "
                                    "is trained at step t <= s + this; the trainer waits "
                                    "for it (tinker_cookbook/rl/train.py:475-477; required "
                                    "there, 4 as skills/research/references/rl.md:307)")
    pipeline_depth: int | None = opt(None, "steps sampling may run ahead: at most U x "
                                     "(depth + 1) groups started but untrained (unset: "
                                     "min(1, max_steps_off_policy); train.py:480-488)")

    def depth(self) -> int:
        """The pipeline depth at this config (train.py:485-488)."""
        if self.pipeline_depth is None:
            return min(1, self.max_steps_off_policy)
        return self.pipeline_depth

    def check(self, cfg: Any) -> None:
        """Refuse values the cookbook refuses (train.py:94-107)."""
        _at_least("tinker", self, 0, "max_steps_off_policy")
        need(self.pipeline_depth is None or 0 <= self.pipeline_depth <= self.max_steps_off_policy,
             "set tinker.pipeline_depth",
             f"must lie in [0, max_steps_off_policy = {self.max_steps_off_policy}]: a deeper "
             "pipeline would break the staleness bound")


@dataclass
class RollFlash:
    """ROLL's RLVR pipeline run asynchronously, ROLL Flash (system `roll-flash`);
    alibaba/ROLL@8eb27cc2. Its rollout_batch_size (prompts a pipeline step trains) is U;
    each prompt's K samples are K requests of one sample each."""

    async_generation_ratio: float = opt(1.0, "how many steps' worth of prompts "
                                        "generation may run ahead; a group is trained at "
                                        "most ceil(ratio) steps after the step it began "
                                        "in, else dropped; 1 as ROLL's async example "
                                        "(examples/qwen2.5-7B-rlvr_megatron/"
                                        "rlvr_config_async.yaml:29); code default 0, "
                                        "synchronous (roll/configs/base_config.py:502-507)")
    max_running_requests: int = opt(128, "most requests in flight per engine replica, "
                                    "the router's cap (base_config.py:156-159, default "
                                    "128; roll/pipeline/rlvr/rlvr_config.py:183-185)")

    def check(self, cfg: Any) -> None:
        """Refuse values ROLL refuses: an asynchronous ratio below 1
        (rlvr_config.py:221-222) or a negative one (generate_scheduler.py:185)."""
        r = self.async_generation_ratio
        need(r == 0 or r >= 1, "set roll_flash.async_generation_ratio",
             f"must be 0 (synchronous) or >= 1, as ROLL's RLVR pipeline requires, not {r}")
        _at_least("roll_flash", self, 1, "max_running_requests")
