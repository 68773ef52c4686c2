"""One typed, self-validating configuration object per run.

Every field is reachable from a TOML file (`--config`), from the named CLI
options, and from `--set section.field=value`; the resolved object is written
whole into the trace's `run_start` header. Every field carries a help text
(`help_of`), shown by `rolloutbench config show`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from harness.core import async_knobs as knobs
from harness.core import laminar_knobs, seer_knobs, tlt_knobs
from harness.core.fields import ConfigError, help_of, opt

__all__ = ["ConfigError", "RunConfig", "help_of", "opt"]

from harness.core.sim_config import (  # noqa: F401  (read from here too)
    DRAFTERS,
    ENGINE_BACKENDS,
    PRECISIONS,
    SPEC_FIELDS,
    STEP_MODELS,
    SYNC_PATHS,
    TRAIN_MODELS,
    WEIGHT_PRECISIONS,
    SimConfig,
    check_spec,
)


@dataclass
class LiveConfig:
    """The live runtime: a model folder made by `rolloutbench model init`."""

    model_dir: str = opt("runs/live-model", "the model folder (make one: rolloutbench model "
                         "init DIR)")
    data_dir: str = opt("", "root of the real datasets (agieval/, scibench/, olympiadbench/); "
                        "needed by dataset workloads")
    lr: float = opt(1e-4, "trainer learning rate")
    temperature: float = opt(1.0, "sampling temperature")
    lengths: str = opt("model", "model: the model decides each response's length (EOS ends "
                       "it); replay: every response has exactly the length the workload "
                       "assigns it, EOS ignored, and the workload's reward (a profile or "
                       "trace:PATH workload; its simulated twin processes the same tokens)")
    max_model_len: int = opt(1024, "engine context length (prompt plus response tokens)")
    kv_cache_mb: int = opt(256, "in-process vLLM: KV cache size in MiB")
    request_timeout_s: float = opt(300.0, "a request still running after this many seconds "
                                   "fails the run (0: no limit)")
    trainer_cores: int = opt(0, "one process (ray_address 'off'): vLLM's engine core alone "
                             "on the first cores; the control loop and the learner (its own "
                             "process, lower priority) on the last N, as on separate devices "
                             "(0: the learner a thread, all sharing every core)")
    ray_address: str = opt("local", "'local': start Ray here; 'HOST:PORT': join a cluster; "
                           "'off': run in one process")
    engine: str = opt("vllm", "engine: vllm, vllm-http or sglang (`rolloutbench backends`)")
    engine_url: str = opt("", "server URL of an HTTP engine (vllm-http, sglang)")
    trainer: str = opt("torch", "trainer backend: torch or megatron")
    engine_gpus: float = opt(0.0, "GPUs the engine actor asks Ray for")
    trainer_gpus: float = opt(0.0, "GPUs the trainer actor asks Ray for")
    megatron_tp: int = opt(1, "megatron trainer: tensor-parallel size")
    megatron_pp: int = opt(1, "megatron trainer: pipeline-parallel size")
    megatron_bucket_mb: int = opt(512, "megatron trainer: weight-update bucket size in MiB")


@dataclass
class RunConfig:
    """One run: the system, the workload, the RL loop's shape and both runtimes."""

    system: str = opt("slime", "system backend (see `rolloutbench systems`)")
    workload: str = opt("lsat-ar", "workload profile (see `rolloutbench workloads`)")
    runtime: str = opt("sim", "sim (the simulator) or live (a real engine and trainer)")
    seed: int = opt(0, "random seed (prompts, lengths, rewards)")
    rounds: int = opt(4, "rollout rounds")
    groups: int = opt(32, "groups (prompts) per rollout round, R")
    group_size: int = opt(8, "samples per prompt, K (GRPO needs >= 2)")
    update_groups: int = opt(2, "groups per optimizer update, U (must divide R)")
    frontier: int = opt(2, "cgp-fgd: groups in service at once, F_w")
    frontier_mode: str = opt("cap", "cgp-fgd: cap (only the F_w frontier groups are "
                             "submitted) or priority (every group submitted, the frontier's "
                             "requests admitted first): RolloutPipe's two readings of FGD")
    concurrency: int = opt(64, "pipelinerl: sequences in flight per engine replica, H")
    max_lag: int = opt(-1, "pipelinerl: admission limit in optimizer steps; sortedrl: updates "
                       "an unfinished group's cached work may cross (-1: none)")
    over_sampling_groups: int | None = opt(None, "april, cgp-april: groups in flight per "
                                           "round, N' (unset: the paper's 2R; 0 or R: no "
                                           "over-sampling; otherwise at least R)")
    partial_rollout: bool = opt(True, "april: resume aborted partial responses next round "
                                "(false: discard them)")
    dynamic_sampling: bool = opt(False, "april: drop groups whose K rewards are all equal "
                                 "and sample a new one (DAPO)")
    rollpacker_tail_batching: bool = opt(True, "rollpacker: speculative short rounds; long "
                                         "prompts wait for a long round")
    rollpacker_speculation: float = opt(1.25, "rollpacker: eta for prompts (>= 1)")
    rollpacker_response_speculation: float = opt(1.25, "rollpacker: eta for responses per "
                                                 "prompt (>= 1)")
    rollpacker_reward_scheduler: bool = opt(True, "rollpacker: rewards as responses finish, "
                                            "adaptive sandbox timeouts")
    rollpacker_planner: bool = opt(True, "rollpacker: adapt the engine's tensor-parallel size "
                                   "to preemptions")
    rollpacker_stream_trainer: bool = opt(True, "rollpacker: half the rollout GPUs train on "
                                          "finished prompts while the rest generate")
    rollpacker_stream_at: float = opt(0.0, "rollpacker: share of prompts done at which the "
                                      "stream trainer starts, in [0, 0.5] (0: adaptive)")
    rollpacker_anchor: str = opt("run", "rollpacker: the sandbox timeout's anchor (the longest "
                                 "correct run of a prompt) kept for the whole run (run) or "
                                 "started empty at each step (step): two readings of Sec. 4.3")
    max_response_tokens: int = opt(0, "response length cap (0: the workload profile's own cap)")
    clamp: float = opt(5.0, "importance-weight clamp (trainer loss and ess_clamped), > 0")
    areal: knobs.AReaL = field(default_factory=knobs.AReaL,
                               metadata={"help": "areal: its staleness manager's knobs"})
    verl_async: knobs.VerlAsync = field(default_factory=knobs.VerlAsync, metadata={
        "help": "verl-fully-async: its rollouter and trainer's knobs"})
    verl_dynamic: knobs.VerlDynamic = field(default_factory=knobs.VerlDynamic, metadata={
        "help": "verl-dynamic: its hybrid replicas' policy"})
    slime_async: knobs.SlimeAsync = field(default_factory=knobs.SlimeAsync, metadata={
        "help": "slime-async: its fully-async example's knobs"})
    skyrl: knobs.SkyRL = field(default_factory=knobs.SkyRL,
                               metadata={"help": "skyrl-async: its fully-async trainer's knobs"})
    prime_rl: knobs.PrimeRL = field(default_factory=knobs.PrimeRL,
                                    metadata={"help": "prime-rl: its orchestrator's knobs"})
    nemo_rl: knobs.NemoRL = field(default_factory=knobs.NemoRL,
                                  metadata={"help": "nemo-rl-async: its async GRPO knobs"})
    tinker: knobs.Tinker = field(default_factory=knobs.Tinker,
                                 metadata={"help": "tinker: the cookbook's async RL knobs"})
    roll_flash: knobs.RollFlash = field(default_factory=knobs.RollFlash, metadata={
        "help": "roll-flash: ROLL's asynchronous RLVR pipeline's knobs"})
    seer: seer_knobs.Seer = field(default_factory=seer_knobs.Seer, metadata={
        "help": "seer: divided rollout and context-aware scheduling"})
    tlt: tlt_knobs.TLT = field(default_factory=tlt_knobs.TLT, metadata={
        "help": "tlt: adaptive speculative rollouts and the drafter trained in the tail"})
    laminar: laminar_knobs.Laminar = field(default_factory=laminar_knobs.Laminar, metadata={
        "help": "laminar: its rollouts' batches, repack and admission"})
    sim: SimConfig = field(default_factory=SimConfig,
                           metadata={"help": "the simulated cluster (the [sim] table)"})
    live: LiveConfig = field(default_factory=LiveConfig,
                             metadata={"help": "the live runtime (the [live] table)"})

    def validate(self) -> RunConfig:
        def need(ok: bool, opt: str, msg: str) -> None:
            if not ok:
                raise ConfigError(f"--{opt}: {msg}")

        for name in ("rounds", "groups", "update_groups", "frontier"):
            need(getattr(self, name) >= 1, name.replace("_", "-"), "must be a positive integer")
        need(self.max_response_tokens >= 0, "set max_response_tokens",
             "must be a positive integer (0: the workload's own cap)")
        need(self.concurrency >= self.group_size, "concurrency",
             "must hold at least one group (>= --group-size)")
        need(self.max_lag >= -1, "max-lag", "must be -1 (no limit) or >= 0")
        need(self.frontier_mode in ("cap", "priority"), "frontier-mode",
             f"must be cap or priority, not {self.frontier_mode!r}")
        over = self.over_sampling_groups
        need(over is None or over == 0 or over >= self.groups, "over-sampling-groups",
             f"{over} groups in flight is fewer than the R={self.groups} a round keeps, so "
             f"nothing would be over-sampled; give at least R (0 or R: no over-sampling; "
             f"unset: the paper's 2R)")
        need(self.rollpacker_speculation >= 1, "set rollpacker_speculation", "must be >= 1")
        need(self.rollpacker_response_speculation >= 1, "set rollpacker_response_speculation",
             "must be >= 1")
        need(0 <= self.rollpacker_stream_at <= 0.5, "set rollpacker_stream_at",
             "must lie in [0, 0.5] (0: adaptive)")
        need(self.rollpacker_anchor in ("run", "step"), "set rollpacker_anchor",
             f"must be run or step, not {self.rollpacker_anchor!r}")
        need(self.group_size >= 2, "group-size", "GRPO needs at least 2 samples per group")
        need(self.seed >= 0, "seed", "must be a non-negative integer")
        need(self.clamp > 0, "set clamp", "the importance-weight clamp must be positive")
        need(self.groups % self.update_groups == 0, "update-groups",
             f"U={self.update_groups} must divide the groups per rollout R={self.groups}")
        need(self.runtime in ("sim", "live"), "runtime",
             f"unknown runtime {self.runtime!r} (known: sim, live)")
        s = self.sim
        need(s.rollout_tp >= 1, "set sim.rollout_tp", "must be >= 1")
        need(s.rollout_ep >= 1 and s.rollout_tp % s.rollout_ep == 0, "set sim.rollout_ep",
             f"must be >= 1 and divide sim.rollout_tp={s.rollout_tp}, got {s.rollout_ep}")
        for name, allowed in (("rollout_precision", WEIGHT_PRECISIONS),
                              ("rollout_kv_dtype", PRECISIONS)):
            need(getattr(s, name) in allowed, f"set sim.{name}",
                 f"must be {' or '.join(allowed)}, not {getattr(s, name)!r}")
        need(s.step_model in STEP_MODELS, "set sim.step_model",
             f"must be {' or '.join(STEP_MODELS)}")
        need(s.train_model in TRAIN_MODELS, "set sim.train_model",
             f"must be {' or '.join(TRAIN_MODELS)}, not {s.train_model!r}")
        need(s.trainer_precision in PRECISIONS, "set sim.trainer_precision",
             f"must be {' or '.join(PRECISIONS)}, not {s.trainer_precision!r}")
        need(s.trainer_precision == "bf16" or (s.train_model == "kernels"
                                                 and s.train_mfu is None),
             "set sim.trainer_precision", "fp8 needs sim.train_model=kernels and no "
             "sim.train_mfu (the MFU line counts BF16 FLOPs only)")
        need(s.engine_backend in ENGINE_BACKENDS, "set sim.engine_backend",
             f"must be {' or '.join(ENGINE_BACKENDS)}")
        need(not s.engine_eager or (s.rollout_precision, s.rollout_kv_dtype) == ("bf16", "bf16"),
             "set sim.engine_eager", "eager steps are measured with BF16 weights and cache only "
             f"(sim.rollout_precision={s.rollout_precision}, "
             f"sim.rollout_kv_dtype={s.rollout_kv_dtype})")
        need(s.rollout_engines >= 1, "set sim.rollout_engines", "must be >= 1")
        need(s.dispatch in ("auto", "least-loaded", "static", "round-robin"),
             "set sim.dispatch", "must be auto, least-loaded, static or round-robin, not "
             f"{s.dispatch!r}")
        need(s.placement in ("disaggregated", "colocated"), "set sim.placement",
             f"must be disaggregated or colocated, not {s.placement!r}")
        need(0 < s.mem_fraction < 1, "set sim.mem_fraction", "must lie in (0, 1)")
        need(s.trainer_gpus >= 1, "set sim.trainer_gpus", "must be >= 1")
        train_n = (s.rollout_tp * s.rollout_engines if s.placement == "colocated"
                   else s.trainer_gpus)
        need(s.trainer_ep >= 1 and train_n % s.trainer_ep == 0, "set sim.trainer_ep",
             f"must be >= 1 and divide the trainer's {train_n} GPUs, got {s.trainer_ep}")
        need(s.trainer_pp >= 1 and train_n % (s.trainer_pp * s.trainer_ep) == 0,
             "set sim.trainer_pp", f"must be >= 1 and, times sim.trainer_ep={s.trainer_ep}, "
             f"divide the trainer's {train_n} GPUs, got {s.trainer_pp}")
        need(s.trainer_vpp == 1 or (s.trainer_vpp > 1 and s.trainer_pp >= 2),
             "set sim.trainer_vpp", f"must be 1, or >= 2 with sim.trainer_pp >= 2 (got "
             f"{s.trainer_vpp} at sim.trainer_pp={s.trainer_pp})")
        for name in ("trainer_tp", "trainer_cp"):
            need(getattr(s, name) >= 1, f"set sim.{name}", "must be >= 1")
        split = s.trainer_tp * s.trainer_cp * s.trainer_pp
        need(train_n % split == 0, "set sim.trainer_tp",
             f"sim.trainer_tp x trainer_cp x trainer_pp = {split} must divide the trainer's "
             f"{train_n} GPUs")
        need(s.train_scale is None or s.train_scale > 0, "set sim.train_scale",
             "must be > 0")
        need(s.train_step_fixed_s is None or s.train_step_fixed_s >= 0,
             "set sim.train_step_fixed_s", "must be >= 0")
        for name, least in (("max_running", 0), ("micro_batch_tokens", 1),
                            ("log_prob_forwards", 0)):
            need(getattr(s, name) >= least, f"set sim.{name}", f"must be >= {least}")
        need(s.kv_cache_tokens >= 0, "set sim.kv_cache_tokens", "must be >= 0 (0: from memory)")
        need(self.live.lengths in ("model", "replay"), "set live.lengths",
             f"must be model or replay, not {self.live.lengths!r}")
        need(s.verifier_workers >= 0, "set sim.verifier_workers", "must be >= 0 (0: no limit)")
        need(s.weight_sync_path in SYNC_PATHS, "set sim.weight_sync_path",
             f"must be one of {', '.join(SYNC_PATHS)}, not {s.weight_sync_path!r}")
        check_spec(s, need)
        for name in ("bw_eff", "compute_eff", "train_mfu"):
            value = getattr(s, name)
            need(value is None or value > 0, f"set sim.{name}", "must be positive")
        for name in ("step_overhead_s", "micro_overhead_s", "weight_sync_s", "materialize_s",
                     "drift", "switch_s"):
            value = getattr(s, name)
            need(value is None or value >= 0, f"set sim.{name}", "must be >= 0")
        for table in (self.areal, self.verl_async, self.verl_dynamic, self.slime_async,
                      self.skyrl, self.prime_rl, self.nemo_rl, self.tinker, self.roll_flash,
                      self.seer, self.tlt, self.laminar):
            table.check(self)
        return self

    def to_dict(self) -> dict[str, Any]:
        """The whole config, less speculative decoding's fields while it is off and a table
        of one system's own (`OWN_TABLES`) but for it or when set: the traces' headers and
        sweep cells' keys of the runs without them stay as they were."""
        out = dataclasses.asdict(self)
        if self.sim.spec_drafter == "off":
            for name in SPEC_FIELDS:
                del out["sim"][name]
        else:  # options added later, at their defaults: headers as before they existed
            for name, off in (("spec_group_acceptance", -1), ("spec_max_batch", 0)):
                if getattr(self.sim, name) == off:
                    del out["sim"][name]
        for table, system in OWN_TABLES.items():
            if self.system != system and getattr(self, table) == type(getattr(self, table))():
                del out[table]
        return out


# table -> the one system that reads it (added after the goldens were written)
OWN_TABLES = {"roll_flash": "roll-flash", "verl_dynamic": "verl-dynamic", "seer": "seer",
              "tlt": "tlt", "laminar": "laminar"}
