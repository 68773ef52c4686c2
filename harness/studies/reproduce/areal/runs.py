"""AReaL's benchmark setups on the simulator, their runs and what is read off a trace.

The benchmark (inclusionAI/AReaL@10d9b282, cited as AReaL@10d9b282;
benchmark/verl_v0_3_0_post1_76084d3/ as bench/): DeepSeek-R1-Distill-Qwen 1.5B, 7B and
32B at 16k and 32k context (bench/README.md:28-30, :50: generation up to context minus
1k, build_cmd.py:136), 512 prompts x 16 answers a step (README.md:49;
areal_config.yaml:19-20), max_head_offpolicyness 4 and 512 rollouts in flight
(areal_config.yaml:4, :6), the proximal log-probs recomputed (recompute_logprob,
:25: one forward besides the update), micro-batches of 32,768 tokens (:33), SGLang at
memory 0.8 (:14), 0.7 above 1.5B (build_cmd.py:142-144). build_cmd.py:99-118 gives
three quarters of the GPUs to SGLang at TP 1 (TP 8 for 32B) and one quarter to the
trainer. The DeepSeek distills have Qwen2.5's shapes: the 7B and 32B are the
`qwen2.5-7b` and `qwen2.5-32b` presets, the 1.5B a config.json here (models/).

What the source leaves out, each a reading (docs/reproductions.md#areal):
- The GPU. AReaL's docs name 8 H800s a node (docs/tutorial/installation.md:9; the v0.1
  blog's runs, blog/AReaL_v0_1.md:30). The simulator prices H800 and H100 alike
  (harness/sim/presets/kernel_gpus.toml:72-78 stands H100 kernels in, for the engine and
  the kernel trainer alike), so H800 is run and stands for both.
- verl's config (its scripts are in a repository not stored here). verl@76084d3's
  defaults (verl/trainer/config/ppo_trainer.yaml:88-107: vLLM, tensor parallel 2,
  gpu_memory_utilization 0.5, no KL loss at :47) or AReaL's own engine layout
  (TP 1, or 8 for 32B, memory as AReaL's): both run (READINGS).
- Response lengths: none are published. The profile is deepscaler's (competition math, as
  AReaL-boba's data): its spreads and its mean of 4,500 tokens (MEAN_PRIOR), a prior not
  fitted, at the 32k cap; a 16k run truncates the same lengths. The simulated verl is far
  faster than the published one at any mean, even served eagerly as verl@76084d3 served
  vLLM (enforce_eager: True, ppo_trainer.yaml:101; `sim.engine_eager`) and with the 74 s
  a step of verl's one-step-off README that harness/sim/switch.py charges, so no length
  could be fitted to verl's rows: what is fitted to them is verl's trainer (`fit`: the
  kernel trainer's `train_scale` on FSDP), which takes up what verl's step spends beyond
  the simulated engine and switch; AReaL's trainer scale is fitted to Fig. 7's staleness 0.
  Both trainers are laid out as the source runs them: AReaL's Megatron-style TP x PP
  (build_cmd.py:106-115) with 32,768-token micro-batches a rank, verl's FSDP on every GPU
  with 16,384 tokens a GPU.

A step's effective throughput (bench/README.md:3-6) is the tokens a step trains over the
time between optimizer steps; the first step is left out (AReaL's pipeline fills there).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.config import RunConfig
from harness.run.execute import reads
from harness.sim.switch import switch
from harness.studies.reproduce import profiles
from harness.studies.reproduce.areal.readings import PANELS, STALENESS_CAP, STALENESS_GPUS

PAPER = "areal"
# verl's runs take a calibration of their own: its trainer is FSDP (verl v0.3's actor),
# whose measured constants and layout (sharded, recomputed) the kernel trainer reads from
# a calibration's [hardware] trainer_framework; AReaL's trainer is Megatron-style (areal.toml)
VERL_CALIBRATION = "areal-verl"
MODELS_DIR = Path(__file__).parent / "models"


def _shown(path: Path) -> str:
    """A path relative to the working folder where it lies below it (what a table shows
    is then the same in every checkout), else absolute."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


MODELS = {"1.5B": _shown(MODELS_DIR / "deepseek-r1-distill-qwen-1.5b" / "config.json"),
          "7B": "qwen2.5-7b", "32B": "qwen2.5-32b"}
GPU = "h800-sxm"
PROMPT_TOKENS = 1024  # max_prompt_len (areal_config.yaml:18)
# The figure's panels: (model, context) -> GPU counts (scaling_trend_vs_verl.png's x axes)
NO_VERL = {("32B", 32768)}  # the figure draws no verl line there
READINGS = ("verl at its defaults", "verl on AReaL's engine layout")
AREAL_ROUNDS, VERL_ROUNDS = 3, 2  # steps, the first left out: AReaL's fill; verl's first
# has no hand-over back to the engine before it (its engine starts with the GPUs)
PROFILE = "deepscaler"
MEAN_PRIOR = 4500.0  # workloads/profiles/deepscaler.toml's mean_tokens: a prior
PROFILE_CAP = 32768 - PROMPT_TOKENS  # the lengths' own cap; a 16k run truncates them
N, U = 16, 512  # answers a prompt, prompts a step


def sglang_tp(model: str) -> int:
    """build_cmd.py:101: SGLang at TP 1 below 32B, TP 8 for 32B."""
    return 8 if model == "32B" else 1


def areal_memory(model: str) -> float:
    """mem_fraction_static: 0.8 (areal_config.yaml:14), 0.7 above 1.5B (build_cmd.py:142-144)."""
    return 0.8 if model == "1.5B" else 0.7


def trainer_layout(model: str) -> tuple[int, int]:
    """(tensor, pipeline) parallel of AReaL's trainer (build_cmd.py:106-115)."""
    return {"1.5B": (1, 2), "7B": (1, 4), "32B": (2, 8)}[model]


def split(gpus: int) -> tuple[int, int]:
    """(SGLang GPUs, trainer GPUs): build_cmd.py:102-104, three quarters to SGLang."""
    rollout = gpus // 4 * 3
    return rollout, gpus - rollout


def profile_text(mean_tokens: float, cap: int = PROFILE_CAP) -> str:
    """The run's profile: deepscaler's prompts and spreads, the given mean and cap."""
    return profiles.profile_text(
        PROFILE, "areal-boba",
        f"deepscaler shape, cap {cap}, mean {mean_tokens:.0f} (AReaL reproduction)",
        mean_tokens, cap, PROMPT_TOKENS)


def workload(mean_tokens: float, folder: Path, cap: int = PROFILE_CAP) -> str:
    """A profile:PATH workload of the given mean and cap, written once into `folder`."""
    return profiles.written(folder, f"areal-c{cap}-m{round(mean_tokens)}",
                            profile_text(round(mean_tokens), cap))


def _base(system: str, model: str, ctx: int, seed: int, rounds: int) -> RunConfig:
    cfg = RunConfig(system=system, workload=PROFILE, seed=seed, group_size=N, groups=U,
                    update_groups=U, max_response_tokens=ctx - PROMPT_TOKENS)
    cfg.rounds = rounds
    s = cfg.sim
    s.calibration, s.model = PAPER, MODELS[model]
    s.rollout_gpu = s.trainer_gpu = GPU
    return cfg


def areal(model: str, ctx: int, gpus: int, seed: int = 0, staleness: int = 4,
          rounds: int = AREAL_ROUNDS) -> RunConfig:
    """AReaL as build_cmd.py runs it on `gpus` GPUs (module docstring)."""
    cfg = _base("areal", model, ctx, seed, rounds)
    s = cfg.sim
    rollout, train = split(gpus)
    s.engine_backend, s.rollout_tp = "sglang", sglang_tp(model)
    s.rollout_engines, s.trainer_gpus = rollout // s.rollout_tp, train
    s.mem_fraction = areal_memory(model)
    s.trainer_tp, s.trainer_pp = trainer_layout(model)
    s.micro_batch_tokens = 32768  # a data-parallel rank's micro-batch (:33)
    s.log_prob_forwards = 1  # recompute_logprob (areal_config.yaml:25)
    cfg.areal.max_head_offpolicyness = staleness
    cfg.areal.max_concurrent_rollouts = 512  # areal_config.yaml:6
    return cfg


def verl(model: str, ctx: int, gpus: int, reading: str, seed: int = 0) -> RunConfig:
    """verl v0.3's colocated synchronous PPO on all `gpus` GPUs, under `reading`."""
    cfg = _base("verl", model, ctx, seed, VERL_ROUNDS)
    s = cfg.sim
    s.calibration = VERL_CALIBRATION
    s.placement, s.engine_backend = "colocated", "vllm"
    s.engine_eager = True  # enforce_eager: True (ppo_trainer.yaml:101 at verl@76084d3)
    if reading == READINGS[0]:  # ppo_trainer.yaml:99, :104 (verl@76084d3)
        s.rollout_tp, s.mem_fraction = 2, 0.5
    else:
        s.rollout_tp, s.mem_fraction = sglang_tp(model), areal_memory(model)
    s.rollout_engines, s.trainer_gpus = gpus // s.rollout_tp, gpus
    s.micro_batch_tokens = 16384  # ppo_max_token_len_per_gpu (ppo_trainer.yaml:38), a GPU's
    s.log_prob_forwards = 1  # old_log_prob; no reference (use_kl_loss False, :47)
    # the hybrid engine's switch as verl's own one-step-off README measured it
    # (harness/sim/switch.py: 74 s a step under FSDP2, bytes re-priced for the setup)
    s.switch_s = round(switch("fsdp", MODELS[model], GPU, gpus, s.rollout_tp).handover_s, 4)
    return cfg


def with_mean(cfg: RunConfig, mean: float, folder: Path, cap: int = PROFILE_CAP) -> RunConfig:
    """The config with the workload of the given mean response length, validated."""
    out = copy.deepcopy(cfg)
    out.workload = workload(mean, folder, cap)
    return out.validate()


@dataclass(frozen=True)
class Run:
    """One simulated point: its label, reading, config and the model whose mean it takes."""

    label: str
    reading: str
    cfg: RunConfig
    model: str


def label(system: str, model: str, ctx: int, gpus: int) -> str:
    return f"{system} {model} {ctx // 1024}k {gpus} GPUs"


def scaling_runs(reading: str, seed: int = 0) -> list[Run]:
    """Every point of the scaling figure under one reading of verl's config."""
    out = []
    for (model, ctx), sizes in PANELS.items():
        for n in sizes:
            out.append(Run(label("areal", model, ctx, n), reading, areal(model, ctx, n, seed),
                           model))
            if (model, ctx) not in NO_VERL:
                out.append(Run(label("verl", model, ctx, n), reading,
                               verl(model, ctx, n, reading, seed), model))
    return out


@reads("train_end", "optimizer_step")
def summary(events: list[dict[str, Any]]) -> dict[str, float]:
    """Effective throughput (tokens/s) and mean step (s): the tokens trained at steps
    2..N over the time from step 1's optimizer step to step N's; a run of one step, its
    tokens over the time from the start to its optimizer step."""
    tokens = [e["tokens"] for e in events if e["ev"] == "train_end"]
    steps = [e["t"] for e in events if e["ev"] == "optimizer_step"]
    if not steps:
        return {"throughput": float("nan"), "step_s": float("nan"), "steps": 0.0}
    first = 1 if len(steps) > 1 else 0
    span = steps[-1] - (steps[0] if first else 0.0)
    return {"throughput": float(np.sum(tokens[first:len(steps)]) / span),
            "step_s": span / max(len(steps) - 1, 1), "steps": float(len(steps))}


def staleness_run(eta: int | None, seed: int = 0) -> RunConfig:
    """Fig. 7's 1.5B at maximum staleness `eta` (None: unbounded, a bound no run reaches)
    on 128 GPUs with 8,192-token answers (`readings` says why these)."""
    cfg = areal("1.5B", STALENESS_CAP + PROMPT_TOKENS, STALENESS_GPUS, seed,
                staleness=10**6 if eta is None else eta)
    return cfg


def eta_label(eta: int | None) -> str:
    return "unbounded" if eta is None else str(eta)
