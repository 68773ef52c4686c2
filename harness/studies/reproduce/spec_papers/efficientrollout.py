"""EfficientRollout (arXiv 2606.18967): its readable setup, its runs and its headline rows.

Read from the authors' repository, furiosa-ai/EfficientRollout@0ff0bc5b (the paper's
evaluation section is not reachable here; its abstract gives the headline):

- 8 x A100-SXM4-80GB, one node (README.md:37);
- verl + vLLM, colocated FSDP, GRPO; Qwen2.5-7B or Qwen2.5-14B (scripts/run_qwen2.5_7b_sd.sh
  :80, run_qwen2.5_14b_sd.sh:81); LLaMA-3.1-8B-Instruct is the third model (README.md:123),
  which the simulator has no preset for: not run;
- 128 prompts x 8 samples, one mini-batch of 128 (:73, :96, :84): one optimizer step a round;
  responses up to 8,192 tokens, prompts up to 1,024 (:75, :74); vLLM at TP 1 on each GPU
  (:92-93), `gpu_memory_utilization` 0.6 (7B, :94) or 0.7 (14B, :95);
- SD "always-on with RTN W4 drafter (fixed gamma)" (README.md:106): a 4-bit round-to-nearest
  copy of the policy drafting gamma = 7 (7B, :35) or 5 (14B, :35) tokens a step.

The headline (abstract; README.md:25): rollout and end-to-end latency "reduced by up to 19.6%
and 12.7%" over an accelerated AR baseline, for the full system (the roofline SD toggle and
the adaptive gamma ladder, :53-58). The simulator runs SD always on at a fixed depth (the
`rtn` mode, :46-48): it has no toggle and no ladder, so its rows say what always-on SD buys.

What cannot be set, and the readings run for it:
- the W4 drafter: the simulator's draft model runs at the engine's bf16. Two readings: a bf16
  model that reads about as many weight bytes as the W4 copy (Qwen3-1.7B, 3.4 GB, for the
  7B's 3.8 GB; Qwen3-4B, 8.0 GB, for the 14B's 7.4 GB), and the policy itself at bf16 (its
  upper bound: four times the W4 copy's reads);
- the acceptance: not readable (the scripts' 0.94 / 0.85 are the ladder's triggers, :27-28,
  not a measurement), so SkyRL's alpha 0.8769 is the stated input;
- the response lengths: SimpleRL-Zoo's MATH level 3-5 prompts are not a workload here; the
  orz-math profile (Qwen2.5-7B base on Open-Reasoner-Zero math, PipelineRL's) stands in.
"""

from __future__ import annotations

import pandas as pd

from harness.core.config import RunConfig
from harness.studies.claims import Claim
from harness.studies.reproduce.skyrl_spec.runs import ALPHA

PAPER_NAME = "EfficientRollout"
REPO = "furiosa-ai/EfficientRollout@0ff0bc5b"
# scripts/run_qwen2.5_{7b,14b}_sd.sh at 0ff0bc5b, by line (the 7B's; the 14B's where noted)
SCRIPT = {"gpus": 8, "engine_tp": 1, "prompts": 128, "samples": 8, "mini_batch": 128,
          "max_prompt": 1024, "max_response": 8192, "micro_batch": 8}
MODELS = {  # model: (gamma, gpu_memory_utilization, W4 stand-in of about the same bytes)
    "qwen2.5-7b": (7, 0.6, "qwen3-1.7b"),
    "qwen2.5-14b": (5, 0.7, "qwen3-4b"),
}
READINGS = {"w4-bytes": "a bf16 draft model of the W4 copy's weight bytes",
            "self-bf16": "the policy itself drafting, at bf16 (the drafter's upper bound)"}
HEADLINE = {"rollout_s": 19.6, "step_s": 12.7}  # abstract / README.md:25: "up to", %
NAMES = {"rollout_s": "rollout", "step_s": "end-to-end (step)"}
TOL = 0.10
WORKLOAD = "orz-math"


def config(model: str, run: str, reading: str = "w4-bytes", seed: int = 0,
           rounds: int = 4) -> RunConfig:
    """One run: `run` is "no-sd" (the AR baseline) or "rtn" (SD always on, fixed gamma)."""
    gamma, mem, stand_in = MODELS[model]
    cfg = RunConfig(system="verl", workload=WORKLOAD, seed=seed, group_size=SCRIPT["samples"],
                    groups=SCRIPT["prompts"], update_groups=SCRIPT["mini_batch"],
                    rounds=rounds, max_response_tokens=SCRIPT["max_response"])
    s = cfg.sim
    s.calibration, s.model = "spec-papers", model
    s.rollout_gpu = s.trainer_gpu = "a100-80gb-sxm"
    s.rollout_engines, s.rollout_tp = SCRIPT["gpus"], SCRIPT["engine_tp"]
    s.placement, s.mem_fraction, s.engine_backend = "colocated", mem, "vllm"
    # ppo_micro_batch_size_per_gpu=8 (:85), no dynamic batch size: 8 samples a micro-batch
    s.micro_batch_tokens = SCRIPT["micro_batch"] * (SCRIPT["max_prompt"] + SCRIPT["max_response"])
    if run == "rtn":
        s.spec_drafter, s.spec_tokens, s.spec_acceptance = "draft", gamma, ALPHA
        s.spec_draft_model = stand_in if reading == "w4-bytes" else model
    return cfg


def tasks(seed: int = 0) -> list[tuple[str, RunConfig]]:
    """Every run, named model/run[/reading]: each model's baseline once, its SD run per
    reading."""
    out = []
    for model in MODELS:
        out.append((f"{model}/no-sd", config(model, "no-sd", seed=seed)))
        out += [(f"{model}/rtn/{r}", config(model, "rtn", r, seed)) for r in READINGS]
    return out


def reductions(sim: pd.DataFrame) -> pd.DataFrame:
    """Per model and reading, the % by which SD cuts the rollout and the step against the
    model's own baseline: 100 (1 - sd / base)."""
    by = sim.set_index("run")
    rows = []
    for model in MODELS:
        base = by.loc[f"{model}/no-sd"]
        for reading in READINGS:
            sd = by.loc[f"{model}/rtn/{reading}"]
            rows.append({"model": model, "reading": reading,
                         **{m: 100 * (1 - sd[m] / base[m]) for m in HEADLINE}})
    return pd.DataFrame(rows)


def claims(sim: pd.DataFrame, paper: str) -> list[Claim]:
    """The headline's two numbers, per reading: the best of the runnable models (the
    paper's "up to" is its best), each a prediction."""
    cut = reductions(sim)
    out = []
    for reading in READINGS:
        best = cut[cut["reading"] == reading]
        for metric, pct in HEADLINE.items():
            out.append(Claim(
                paper, f"{PAPER_NAME}: {NAMES[metric]} latency cut %, best of "
                f"{' / '.join(MODELS)} (paper: up to)", f"{metric}_cut_pct",
                f"8xA100 TP 1, always-on SD, gamma 7/5, alpha={ALPHA} (SkyRL's)", pct, pct,
                float(best[metric].max()), TOL, reading=reading))
    return out
