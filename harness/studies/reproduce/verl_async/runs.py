"""verl's fully-async setup on the simulator, its runs and what is read off their traces.

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
  the cap at 28k and the mean fitted to the colocated runs' gen times
  (`rolloutbench calibrate verl-async`, fit.py): the baseline's observations, as the
  calibration rule allows. The README says lengths change during training and differ
  between runs (README.md:385-386, 400-402); the simulator draws every step from one
  fixed distribution, so its steps are compared with the table's per-step means (the
  mean over a run's steps) and not with the totals at 100, 200 or 300 steps. Two readings
  of the fit: `one length` (one mean for every run: the same model and dataset) and
  `per-size lengths` (each cluster size its colocated run's own mean, which its
  fully-async twin then uses).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.config import RunConfig
from harness.core.files import write_atomic
from harness.run.execute import reads

PAPER = "verl-async"
K, U, R = 16, 32, 512  # rollout.n, ppo_mini_batch_size, train_batch_size (README.md:339-345)
MAX_RESPONSE = 28 * 1024  # sh:39
TP = 4  # gen_tp (sh:59)
SP = 4  # Ulysses sequence parallel (sh:60): one data-parallel rank a SP group
MICRO_TOKENS_PER_GPU = (2048 + MAX_RESPONSE) * 2  # actor_ppo_max_token_len (sh:55)
SIZES = (32, 64, 128)  # colocated GPUs; fully async splits them in halves (README.md:354-361)
ASYNC_ROUNDS = 6  # sync windows simulated: the first (the fill) is left out of the mean
SYNC_ROUNDS = 2
READINGS = ("one length", "per-size lengths")
PROFILE_SOURCE = "dapo-math-17k"  # the spreads of the lengths (module docstring)


def profile_text(mean_tokens: float) -> str:
    """The workload profile of the runs: dapo-math-17k's shape and prompts, the cap at
    28k and the given mean (a profile:PATH file, `workloads/profile.py`)."""
    from workloads.profile import load_profile

    p = load_profile(PROFILE_SOURCE)
    return "\n".join([
        'name = "verl-async-dapo"',
        f'summary = "dapo-math-17k shape, 28k cap, mean {mean_tokens:.0f} fitted to verl\'s '
        f'colocated gen times"',
        "[prompt]", f"mu_log = {p.prompt_mu_log}", f"sigma_log = {p.prompt_sigma_log}",
        f"min = {p.prompt_min}", f"max = {p.prompt_max}",
        "[response]", f"mean_tokens = {mean_tokens:.1f}", f"max_tokens = {MAX_RESPONSE}",
        f"min_tokens = {p.min_tokens}", f"sigma_between = {p.sigma_between}",
        f"sigma_within = {p.sigma_within}",
        "[reward]", f"pass_rate = {p.pass_rate}", f"slope = {p.pass_slope}",
        "[verifier]", f'kind = "{p.verifier_kind}"', f"latency_mean_s = {p.verify_mean_s}",
        f"latency_sigma = {p.verify_sigma}", ""])


def workload(mean_tokens: float, folder: Path) -> str:
    """A profile:PATH workload of the given mean, written once into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"dapo-7b-m{round(mean_tokens)}.toml"
    text = profile_text(round(mean_tokens))
    if not path.exists() or path.read_text() != text:
        write_atomic(path, text)
    return f"profile:{path}"


def base(system: str, seed: int, gpus: int, calibration: str = PAPER) -> RunConfig:
    """One run of the setup on `gpus` GPUs (colocated: all of them; a split: each side)."""
    cfg = RunConfig(system=system, workload=PROFILE_SOURCE, seed=seed, group_size=K,
                    groups=R, update_groups=U, max_response_tokens=MAX_RESPONSE)
    s = cfg.sim
    s.calibration, s.model, s.engine_backend = calibration, "qwen2.5-7b", "vllm"
    s.rollout_gpu = s.trainer_gpu = "h20"
    s.rollout_tp, s.mem_fraction = TP, 0.80
    s.rollout_engines = gpus // TP
    s.trainer_gpus = gpus
    s.micro_batch_tokens = MICRO_TOKENS_PER_GPU * gpus // SP
    return cfg


def colocated(seed: int, gpus: int) -> RunConfig:
    """verl's colocated synchronous trainer (verl's `verl` system) on `gpus` GPUs."""
    cfg = base("verl", seed, gpus)
    cfg.sim.placement, cfg.rounds = "colocated", SYNC_ROUNDS
    return cfg


def fully_async(seed: int, gpus: int, staleness: float = 0.5, trigger: int = 4,
                require_batches: int = 4, partial: bool = True) -> RunConfig:
    """verl's fully-async trainer on `gpus` rollout GPUs and as many training GPUs."""
    cfg = base("verl-fully-async", seed, gpus)
    cfg.rounds = ASYNC_ROUNDS
    cfg.sim.log_prob_forwards = 0  # use_rollout_log_probs (module docstring)
    v = cfg.verl_async
    v.staleness_threshold, v.trigger_parameter_sync_step = staleness, trigger
    v.require_batches, v.partial_rollout = require_batches, partial
    return cfg


@dataclass(frozen=True)
class Run:
    """One configuration of the reproduction: its label, its config, its colocated size
    (whose fitted length it uses in the per-size reading)."""

    label: str
    cfg: RunConfig
    size: int


def runs(seed: int) -> list[Run]:
    """Every configuration the README's tables report (before the workload is set)."""
    out = [Run(f"colocate {n}", colocated(seed, n), n) for n in SIZES]
    out += [Run(f"fully async {n // 2}:{n // 2}", fully_async(seed, n // 2), n)
            for n in SIZES]
    # 16:16's script runs staleness 0.1 (sh:74) where the README's setup says 0.5 (:351)
    out.append(Run("fully async 16:16 s=0.1", fully_async(seed, 16, staleness=0.1), 32))
    # 128 GPUs: the mode ablation (README.md:371-376) and the staleness ablation (:389-394)
    for s in (0.0, 0.1, 0.3):  # 0.5 is "fully async 64:64"
        out.append(Run(f"64:64 s={s:g}", fully_async(seed, 64, staleness=s), 128))
    out.append(Run("64:64 s=0.5 no partial", fully_async(seed, 64, partial=False), 128))
    # require_batches 1 and 2 (README.md:404-408) at 512 prompts a sync, as README.md:123-124
    # asks for a fair comparison: trigger = 512 / (require_batches x 32)
    for rb in (1, 2):
        out.append(Run(f"64:64 require_batches={rb}",
                       fully_async(seed, 64, trigger=R // (rb * U), require_batches=rb), 128))
    return out


def with_lengths(run: Run, means: dict[int, float], folder: Path) -> RunConfig:
    """The run's config with the workload of its reading's fitted mean."""
    cfg = copy.deepcopy(run.cfg)
    cfg.workload = workload(means[run.size], folder)
    return cfg.validate()


def _busy(spans: list[tuple[float, float]], t0: float, t1: float) -> float:
    return sum(max(0.0, min(b, t1) - max(a, t0)) for a, b in spans)


@reads("run_start", "rollout_start", "rollout_complete", "train_start", "train_end",
       "decision", "run_end")
def summary(events: list[dict[str, Any]]) -> dict[str, float]:
    """A run's mean step, gen and training seconds, per the module's readings.

    Windows: between parameter syncs (fully async, the first left out) or between round
    starts (colocated, the last round ending at the run's end)."""
    spans: list[tuple[float, float]] = []
    opened = 0.0
    for e in events:
        if e["ev"] == "train_start":
            opened = e["t"]
        elif e["ev"] == "train_end":
            spans.append((opened, e["t"]))
    syncs = [e["t"] for e in events if e["ev"] == "decision" and e.get("what") == "param_sync"]
    end = events[-1]["t"]
    if syncs:
        edges = syncs
    else:
        edges = [e["t"] for e in events if e["ev"] == "rollout_start"] + [end]
    windows = list(zip(edges[:-1], edges[1:], strict=True))
    walls = np.array([b - a for a, b in windows])
    train = np.array([_busy(spans, a, b) for a, b in windows])
    if syncs:
        gen = walls - train
    else:
        done = [e["t"] for e in events if e["ev"] == "rollout_complete"]
        gen = np.array([d - a for (a, _), d in zip(windows, done, strict=False)])
    return {"step_s": float(walls.mean()), "gen_s": float(gen.mean()),
            "train_s": float(train.mean()), "windows": float(len(windows)),
            "step_sd_s": float(walls.std(ddof=1)) if len(walls) > 1 else math.nan}
