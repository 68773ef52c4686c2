"""verl's fully-async setup on the simulator, its runs and how they are read.

The setup of the 7B runs, from verl-project/verl@1dda039 (cited below as verl@1dda039):
verl/experimental/fully_async_policy/README.md:333-352 (H20, Qwen2.5-Math-7B, DAPO on
dapo-math-17k, vLLM + FSDP2, max response 28k, rollout.n 16, ppo_mini_batch_size 32;
colocated sync train_batch_size 512; fully async require_batches 4,
trigger_parameter_sync_step 4, staleness_threshold 0.5, partial_rollout True) and the
scripts it ran, shell/dapo_7b_math_fsdp2_{16_16,32_32,64_64}.sh (cited as sh:LINE):
max_response_length 28 x 1024 (sh:39), max_prompt_length 2048 (sh:38), vLLM at
tensor-parallel 4 (gen_tp, sh:59) with gpu_memory_utilization 0.80 (sh:120), FSDP2 with
Ulysses sequence parallel 4 (sp_size, sh:60) and dynamic batches of at most
(prompt + response) x 2 tokens a GPU (sh:54-55). Qwen2.5-Math-7B has Qwen2.5-7B's shape
(28 layers, hidden 3584, 4 KV heads), the `qwen2.5-7b` preset.

The harness's choices, each a reading:
- A verl "step" of the fully-async runs is one parameter-sync window: its timing_s/*
  metrics are summed over the trainer steps of a sync (detach_utils.py:207-208, 257-258:
  "timing_s/" aggregates as time_sum), and trigger 4 x require_batches 4 x 32 prompts =
  512 prompts, the colocated step's train_batch_size. A round here is that window (R =
  512 groups), and a run's "step" is the mean wall time between two syncs past the first
  (the fill). The colocated step is a round's wall time, the same 512 prompts.
- "gen" of a fully-async step is the trainer's wait for samples (fully_async_trainer.py:
  643-652 times `_fit_generate`, the queue read), read here as the window's wall time
  less its training; "update_actor" is the window's training. The colocated "gen" is the
  rollout (every response done), and old_log_prob + update_actor its training.
- The fully-async trainer takes the engine's log-probs (use_rollout_log_probs: True,
  config/fully_async_ppo_trainer.yaml:87; README.md:160-166), so it runs no old-log-prob
  forward (`sim.log_prob_forwards` 0); the colocated trainer runs it (the table's
  old_log_prob column).
- Response lengths. verl reports none; they are the dapo-math-17k profile's shape
  (workloads/profiles/dapo-math-17k.toml: its between- and within-prompt spreads) with
  the setup's cap and a mean fitted to the colocated runs (`rolloutbench calibrate
  verl-async`, fit.py, which names the three readings of that fit): the baseline's
  observations, as the calibration rule allows. The README says lengths change during
  training and differ between runs (README.md:385-386, 400-402); the simulator draws every
  step from one fixed distribution, so its steps are compared with the table's per-step
  means (the mean over a run's steps); the 100-step totals give a second window (`claims`).
- The colocated switch (`harness/sim/switch.py`: sized per framework from the one-step-off
  README's gen minus generate_sequences, less the slowest replica's lead over the mean that
  this difference also holds and the simulated static split prices again, `fit.LEADS`) is
  charged as two hand-overs a step; verl's
  colocated gen holds the sharding manager's whole switch (verl@503ea75:verl/workers/
  sharding_manager/fsdp_vllm.py:193-240), so the colocated gen read here runs from the
  round's start to its first training, both hand-overs in it, and the first round (which
  the simulator starts with the engine awake) is left out of the means.
- The trainer is the kernel trainer (harness/sim/trainer) at the reading's fitted
  `train_scale` and `train_step_fixed_s` (`fit`), in each script's layout: FSDP2's Ulysses
  sequence parallel (sp_size 4, sh:60) as its context parallelism (a sequence's tokens
  split over the group), Megatron's TP, PP and CP as the scripts set them; a replica's
  micro-batch is ppo_max_token_len_per_gpu times the SP or CP size (verl@6f0b21c:verl/
  workers/actor/dp_actor.py:396, megatron_actor.py:191). Its passes are the calibration's
  framework's (`[hardware] trainer_framework`): the simulator takes one framework a
  calibration, so the Megatron setups run under their own, `MEGATRON_PAPER` (the same
  priors; Megatron's distributed optimizer, no per-micro-batch gathers, no recompute).
  verl's update_actor times the optimizer's steps with the mini-batches (dp_actor.py:
  359-503: each mini-batch's `_optimizer_step` inside `update_policy`), so a window's
  training holds them (`optimizer_spans`), and with them the fixed cost a step.
- A fully-async `update_actor` is per 512-prompt window, as the colocated one: the trainer
  takes require_batches x ppo_mini_batch_size = 128 prompts a step, each sample one prompt
  with its n responses (verl@6f0b21c:recipe/fully_async_policy/fully_async_trainer.py:
  100-102, fully_async_rollouter.py:298-306), adds each step's metrics to an aggregator
  (fully_async_trainer.py:266-268) that sums every "timing_s/" metric (detach_utils.py:
  366-368, 405-406) and logs it once per parameter sync, at the sync's version
  (fully_async_trainer.py:337-348): four steps, 512 prompts.
- The colocated runs' weight sync is the transfer model's CUDA IPC publication of the
  setup's model on its own GPUs (`colocated_sync_s`; harness/sim/weight_sync.py).
- The 30B fully-async run's weight sync is verl's own measurement of that model's sync
  without checkpoint-engine, 15.76 s (README.md:459, Megatron, 16 trainer and 16 rollout
  ranks): an input measured on the setup's model and GPUs, in place of the 7B's 0.12 s
  scaled by bytes (0.48 s).
- Fully-async gen is the trainer's `_fit_generate`, which also unpickles the queued
  samples and assembles the padded batch (verl@b25bb7d:recipe/fully_async_policy/
  fully_async_trainer.py:125-182); the simulator's trainer does neither, so that time is
  in the README's gen and not in the simulated wait: a simulated gen below the README's
  by a few seconds is that.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from pathlib import Path

from harness.core.config import RunConfig
from harness.sim.switch import Switch, switch
from harness.sim.weight_sync import predict_sync_s
from harness.studies.reproduce import profiles
from harness.studies.reproduce.verl_async.summary import summary  # noqa: F401  (the runs' reader)

PAPER = "verl-async"
# The Megatron setups' calibration: the same priors under Megatron's passes (fit_file.py)
MEGATRON_PAPER = "verl-async-megatron"
ASYNC_ROUNDS = 6  # sync windows simulated: the first (the fill) is left out of the mean
SYNC_ROUNDS = 3  # the first left out: the simulator starts it with the engine awake
BASE_READINGS = ("lengths from gen", "lengths from gen, per size", "lengths from training")
# PR #4307 (verl@15a9b0f) swapped colocate-32's and 16:16's update_actor cells (README.md
# at verl@6f0b21c:recipe/fully_async_policy/README.md:333-334: 313.81 and 269.80); the
# original order is the main reading (step less its parts is 10.7-11.2 s in every colocated
# row and 3.7-4.3 s in every fully-async one; swapped, 55 s and -40 s), the swapped one
# the second (7B runs only: no other setup reads those cells)
SWAPPED = "cells swapped (verl@15a9b0f)"
# the gen-fitted 7B with no fixed cost a step (its scale alone fitted), beside its fit: what
# the fixed cost does (7B runs only)
NO_FIXED = "lengths from gen, no fixed cost"
# the gen-fitted 7B with vLLM served eagerly, as verl's rollout did in the runs' era
# (enforce_eager: True at verl@94d681d:verl/trainer/config/rollout/rollout.yaml:35, the
# fully-async work's branch; False on main from ff6978c): its own mean, scale and fixed cost
EAGER = "lengths from gen, eager vLLM (verl@94d681d rollout.yaml:35)"
READINGS = (BASE_READINGS + tuple(f"{r}, {SWAPPED}" for r in BASE_READINGS)
            + (NO_FIXED, EAGER))
PROFILE_SOURCE = "dapo-math-17k"  # the spreads of the lengths (module docstring)


@dataclass(frozen=True)
class Setup:
    """One published setup: its model, engine, batch and trainer (cited where defined)."""

    name: str
    model: str
    max_response: int
    tp: int  # the engine's tensor-parallel size (gen_tp / INFER_TP)
    k: int  # rollout.n
    u: int  # ppo_mini_batch_size, in prompts
    r: int  # train_batch_size: the prompts of one step
    tokens_per_gpu: int  # actor_ppo_max_token_len: a dynamic micro-batch's tokens a GPU
    mem_fraction: float  # gpu_memory_utilization
    trainer_ep: int = 1
    trainer_tp: int = 1  # the kernel trainer's layout: Megatron's TP, PP and CP, and
    trainer_pp: int = 1  # FSDP2's Ulysses sequence parallel as CP (a sequence's tokens split
    trainer_cp: int = 1  # over the group: `base`)
    colocated_forwards: int = 1  # old_log_prob (and a KL reference's)
    async_forwards: int = 0  # use_rollout_log_probs (and a KL reference's)
    framework: str = "fsdp"  # the trainer's (harness/sim/switch.py prices its switch)
    trainer_shard: int = 0  # GPUs one parameter shard spans (0: every GPU, FSDP)
    colocate_k: int = 0  # the colocated baseline's rollout.n where its script differs (0: k)
    sync_s: float = 0.0  # a measured weight sync of the setup's model (0: the calibration's)
    eager: bool = False  # vLLM without CUDA graphs (sim.engine_eager: `EAGER`)


# The 7B runs (module docstring; sh:38-60, :120)
SEVEN_B = Setup("7b", "qwen2.5-7b", 28 * 1024, 4, 16, 32, 512, (2048 + 28 * 1024) * 2, 0.80,
                trainer_cp=4)
# Qwen3-30B-A3B-Base (README.md:412-420; shell/grpo_30b_a3b_base_math_megatron_96_32.sh,
# cited as 30b.sh): 8k responses (:33), n 16 (:104), mini-batch 128 (:105), train batch 512
# (README), vLLM TP 4 (:64), Megatron TP 2 x CP 2 x EP 8 (:58-60), (prompt + response)
# tokens a GPU (:48), memory 0.7 (:176), a KL loss (use_kl_loss True, :24): the reference's
# forward besides old_log_prob in the colocated run, and in the fully-async one (README's
# ref column); its sync 15.76 s (README.md:459, module docstring); parameters sharded over
# EP 8 x TP 2 (the experts: all but about 1.5B of its 30.5B)
MOE = Setup("moe", "qwen3-30b-a3b", 8 * 1024, 4, 16, 128, 512, 2048 + 8 * 1024, 0.70,
            trainer_ep=8, trainer_tp=2, trainer_cp=2, colocated_forwards=2, async_forwards=1,
            framework="megatron",
            trainer_shard=16, sync_s=15.76)
# One-step-off (one_step_off_policy/README.md:53-67, cited as osp.md; its scripts
# shell/dapo_7b_math_{fsdp2,megatron}_4_12.sh as osp.sh): 16 H20s, 4 generating and 12
# training (osp.md:53-55), against colocated sync on all 16; responses up to 20,480 (FSDP2)
# and 8,192 (Megatron) tokens (osp.md:58; the scripts say 8k for both, :18); what the README
# leaves out from the scripts: n 12 (:26), train batch 512, mini-batch 32 (:25-27), vLLM TP 2
# (:60 / :59), (prompt + response) x 2 tokens a GPU (:56 / :55) on ranks of 4 GPUs (Ulysses
# SP 4, :61; Megatron TP 2 x PP 2, :60-61), memory 0.80; no KL loss (:11). The Megatron
# colocated baseline runs n 16, not 12 (verl@1dda039:verl/experimental/one_step_off_policy/
# shell/dapo_7b_math_megatron_colocate.sh:26; FSDP2's colocate.sh:26 runs 12): per
# trajectory its training GPU-seconds are the 4:12 run's (463 x 16 / 8,192 against
# 467 x 12 / 6,144)
ONE_STEP_FSDP2 = Setup("one_step_fsdp2", "qwen2.5-7b", 20480, 2, 12, 32, 512,
                       (2048 + 20480) * 2, 0.80, trainer_cp=4, colocated_forwards=1,
                       async_forwards=1)
ONE_STEP_MEGATRON = Setup("one_step_megatron", "qwen2.5-7b", 8192, 2, 12, 32, 512,
                          (2048 + 8192) * 2, 0.80, trainer_tp=2, trainer_pp=2,
                          colocated_forwards=1, async_forwards=1, framework="megatron",
                          trainer_shard=4, colocate_k=16)
ONE_STEP_ROUNDS = 5  # steps: the first (nothing to overlap) and the last (no next batch) are
# left out of the mean
SEVEN_B_EAGER = replace(SEVEN_B, name="7b-eager", eager=True)  # the `EAGER` reading's fit
SINGLE = {s.name: s for s in (MOE, ONE_STEP_FSDP2, ONE_STEP_MEGATRON)}  # one colocated row
SIZES = (32, 64, 128)  # 7B colocated GPUs; fully async splits them in halves (:354-361)


def profile_text(mean_tokens: float, cap: int) -> str:
    """The workload profile of the runs: dapo-math-17k's shape and prompts, the given cap
    and mean (a profile:PATH file, `workloads/profile.py`)."""
    return profiles.profile_text(
        PROFILE_SOURCE, "verl-async-dapo",
        f"dapo-math-17k shape, cap {cap}, mean {mean_tokens:.0f} fitted to verl\'s "
        "colocated gen times", mean_tokens, cap)


def workload(mean_tokens: float, folder: Path, cap: int) -> str:
    """A profile:PATH workload of the given mean and cap, written once into `folder`."""
    return profiles.written(folder, f"dapo-c{cap}-m{round(mean_tokens)}",
                            profile_text(round(mean_tokens), cap))


def base(system: str, seed: int, gpus: int, setup: Setup = SEVEN_B, trainer_gpus: int = 0,
         calibration: str = PAPER, k: int = 0) -> RunConfig:
    """One run of `setup`: `gpus` rollout GPUs (colocated: all of them) and `trainer_gpus`
    training GPUs (0: as many); `k` responses a prompt (0: the setup's)."""
    cfg = RunConfig(system=system, workload=PROFILE_SOURCE, seed=seed, group_size=k or setup.k,
                    groups=setup.r, update_groups=setup.u, max_response_tokens=setup.max_response)
    s = cfg.sim
    if calibration == PAPER and setup.framework == "megatron":
        calibration = MEGATRON_PAPER  # its trainer priced with Megatron's passes
    s.calibration, s.model, s.engine_backend = calibration, setup.model, "vllm"
    s.rollout_gpu = s.trainer_gpu = "h20"
    s.rollout_tp, s.mem_fraction = setup.tp, setup.mem_fraction
    s.engine_eager = setup.eager
    s.rollout_engines = gpus // setup.tp
    s.trainer_gpus = trainer_gpus or gpus
    s.trainer_ep, s.trainer_tp = setup.trainer_ep, setup.trainer_tp
    s.trainer_pp, s.trainer_cp = setup.trainer_pp, setup.trainer_cp
    # one data-parallel replica's micro-batch: the per-GPU budget times the group a
    # sequence is split over (Ulysses SP, verl@6f0b21c:verl/workers/actor/dp_actor.py:396;
    # Megatron's CP, megatron_actor.py:191); TP and PP ranks share their replica's tokens
    s.micro_batch_tokens = setup.tokens_per_gpu * setup.trainer_cp
    return cfg


def switch_of(setup: Setup, gpus: int, lead_s: float | None = None) -> Switch:
    """The colocated switch of `setup` on `gpus` H20s (harness/sim/switch.py), less the
    slowest replica's lead over the mean that the published seconds hold and the static
    split prices again (`lead_s`; None: the calibration's, fitted by `fit`)."""
    if lead_s is None:
        from harness.sim import calibration

        lead_s = float(calibration.load(PAPER).get("switch", {}).get(setup.framework, 0.0))
    return switch(setup.framework, setup.model, "h20", gpus, setup.tp, setup.trainer_shard,
                  imbalance_s=lead_s)


def colocated(seed: int, gpus: int, setup: Setup = SEVEN_B) -> RunConfig:
    """verl's colocated synchronous trainer (verl's `verl` system) on `gpus` GPUs."""
    cfg = base("verl", seed, gpus, setup, k=setup.colocate_k)
    cfg.sim.placement, cfg.rounds = "colocated", SYNC_ROUNDS
    cfg.sim.log_prob_forwards = setup.colocated_forwards
    cfg.sim.switch_s = round(switch_of(setup, gpus).handover_s, 4)
    cfg.sim.weight_sync_s = colocated_sync_s(setup, gpus)
    return cfg


def colocated_sync_s(setup: Setup, gpus: int) -> float:
    """A colocated run's parameter sync: the transfer model's CUDA IPC publication of the
    setup's model on its H20s (harness/sim/weight_sync.py), what the hybrid engine's
    resharding hands vLLM each step; the fit charges the same (`fit`)."""
    return round(predict_sync_s(setup.model, "h20", gpus, gpus, path="ipc", colocated=True), 4)


def fully_async(seed: int, gpus: int, staleness: float = 0.5, trigger: int = 4,
                require_batches: int = 4, partial: bool = True, setup: Setup = SEVEN_B,
                trainer_gpus: int = 0) -> RunConfig:
    """verl's fully-async trainer on `gpus` rollout GPUs and `trainer_gpus` (0: as many)."""
    cfg = base("verl-fully-async", seed, gpus, setup, trainer_gpus)
    cfg.rounds = ASYNC_ROUNDS
    cfg.sim.log_prob_forwards = setup.async_forwards  # use_rollout_log_probs (docstring)
    if setup.sync_s:  # a colocated run's sync is its switch's resharding
        cfg.sim.weight_sync_s = setup.sync_s
    v = cfg.verl_async
    v.staleness_threshold, v.trigger_parameter_sync_step = staleness, trigger
    v.require_batches, v.partial_rollout = require_batches, partial
    return cfg


@dataclass(frozen=True)
class Run:
    """One configuration of the reproduction: its label, its config, and the colocated
    run whose fitted length it uses (a 7B size, or another setup's name)."""

    label: str
    cfg: RunConfig
    size: int | str


def runs(seed: int) -> list[Run]:
    """Every configuration the README's tables report (before the workload is set)."""
    out = [Run(f"colocate {n}", colocated(seed, n), n) for n in SIZES]
    out += [Run(f"fully async {n // 2}:{n // 2}", fully_async(seed, n // 2), n)
            for n in SIZES]
    # 16:16's and 32:32's scripts run staleness 0.1 (16_16.sh:74, 32_32.sh:74) where the
    # README's setup says 0.5 (:351)
    out.append(Run("fully async 16:16 s=0.1", fully_async(seed, 16, staleness=0.1), 32))
    out.append(Run("fully async 32:32 s=0.1", fully_async(seed, 32, staleness=0.1), 64))
    # 128 GPUs: the mode ablation (README.md:371-376) and the staleness ablation (:389-394)
    for s in (0.0, 0.1, 0.3):  # 0.5 is "fully async 64:64"
        out.append(Run(f"64:64 s={s:g}", fully_async(seed, 64, staleness=s), 128))
    out.append(Run("64:64 s=0.5 no partial", fully_async(seed, 64, partial=False), 128))
    # require_batches 1 and 2 (README.md:404-408) at 512 prompts a sync, as README.md:123-124
    # asks for a fair comparison: trigger = 512 / (require_batches x 32)
    for rb in (1, 2):
        out.append(Run(f"64:64 require_batches={rb}",
                       fully_async(seed, 64, trigger=SEVEN_B.r // (rb * SEVEN_B.u),
                                   require_batches=rb), 128))
    # Qwen3-30B-A3B: colocated 128 against 96:32, trigger 4, require_batches 1 (30b.sh:108-111)
    out.append(Run("30B colocate 128", colocated(seed, 128, MOE), MOE.name))
    out.append(Run("30B fully async 96:32", fully_async(seed, 96, require_batches=1, setup=MOE,
                                                        trainer_gpus=32), MOE.name))
    for setup, label in ((ONE_STEP_FSDP2, "FSDP2"), (ONE_STEP_MEGATRON, "Megatron")):
        out.append(Run(f"osp colocate 16 {label}", colocated(seed, 16, setup), setup.name))
        osp = base("verl-one-step-off", seed, 4, setup, trainer_gpus=12)
        osp.rounds, osp.sim.log_prob_forwards = ONE_STEP_ROUNDS, setup.async_forwards
        out.append(Run(f"one-step-off 4:12 {label}", osp, setup.name))
    return out


def with_lengths(run: Run, means: dict[int | str, float], folder: Path) -> RunConfig:
    """The run's config with the workload of its reading's fitted mean."""
    cfg = copy.deepcopy(run.cfg)
    cfg.workload = workload(means[run.size], folder, cfg.max_response_tokens)
    return cfg.validate()
