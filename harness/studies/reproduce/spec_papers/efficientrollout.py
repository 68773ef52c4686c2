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
- the toggle: the full system switches SD off where its roofline cost model says SD loses
  (:51-53; sd_toggle/README.md). Two readings: `always-on` (the `rtn` mode, what the
  headline's system would be without its toggle) and `toggle`, speculation only up to the
  batch where the simulator's own speculative step stops paying at 1,024 tokens a sequence
  (`runs.crossover`; the sweep's context, sd_toggle/configs/sweep_a100_tp1_qwen257b.csv),
  `sim.spec_max_batch`. The adaptive gamma ladder (5, 7, 9, 11, :31) is not modelled: gamma
  stays the `rtn` mode's;
- the W4 drafter: the simulator's draft model runs at bf16. A bf16 stand-in of the W4 copy's
  weight bytes and KV cache stands in (`drafters/`, its README: 5.444 GB for the 7B's, the
  authors' `W_d` 5.443 GB, sd_toggle/configs/a100_tp1_qwen257b.json:13; 9.722 GB for the
  14B's, 9.721 GB). The simulator prices the 7B's at 4.86 ms a step (one sequence, 1,024
  tokens on an A100), the authors measured their W4 drafter's at 4.38 ms
  (sweep_a100_tp1_qwen257b.csv, drafter_decode): a check, not a fit;
- the acceptance: not readable (the scripts' 0.94 / 0.85 are the ladder's triggers, :27-28,
  not a measurement), so SkyRL's alpha 0.8769 is the stated input;
- the response lengths: SimpleRL-Zoo's MATH level 3-5 prompts are not a workload here; the
  orz-math profile (Qwen2.5-7B base on Open-Reasoner-Zero math, itself an assumption of
  mean 2,000 tokens) stands in.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.config import RunConfig
from harness.studies.claims import Claim
from harness.studies.reproduce.skyrl_spec.runs import ALPHA
from harness.studies.reproduce.spec_papers.runs import crossover

PAPER_NAME = "EfficientRollout"
REPO = "furiosa-ai/EfficientRollout@0ff0bc5b"
# scripts/run_qwen2.5_{7b,14b}_sd.sh at 0ff0bc5b, by line (the 7B's; the 14B's where noted)
SCRIPT = {"gpus": 8, "engine_tp": 1, "prompts": 128, "samples": 8, "mini_batch": 128,
          "max_prompt": 1024, "max_response": 8192, "micro_batch": 8}
DRAFTERS = Path(__file__).parent / "drafters"
MODELS = {  # model: (gamma, gpu_memory_utilization, the W4 copy's bf16 stand-in)
    "qwen2.5-7b": (7, 0.6, str(DRAFTERS / "qwen2.5-7b-w4.json")),
    "qwen2.5-14b": (5, 0.7, str(DRAFTERS / "qwen2.5-14b-w4.json")),
}
READINGS = {"always-on": "SD on at every batch (the rtn mode)",
            "toggle": "SD only up to the batch where the simulator's speculative step pays"}
CONTEXT = 1024  # tokens a sequence at which the toggle's batch is read (the sweep's)
HEADLINE = {"rollout_s": 19.6, "step_s": 12.7}  # abstract / README.md:25: "up to", %
NAMES = {"rollout_s": "rollout", "step_s": "end-to-end (step)"}
TOL = 0.10
CONFIG = f"8xA100 TP 1, W4 drafter's bytes, gamma 7/5, alpha={ALPHA} (SkyRL's)"
WORKLOAD = "orz-math"


def config(model: str, run: str, reading: str = "always-on", seed: int = 0,
           rounds: int = 4) -> RunConfig:
    """One run: `run` is "no-sd" (the AR baseline) or "rtn" (SD at a fixed gamma), always
    on or toggled by batch (`reading`)."""
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
        s.spec_draft_model = stand_in
        if reading == "toggle":
            s.spec_max_batch = crossover(s, CONTEXT)
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


def table(sim: pd.DataFrame) -> pd.DataFrame:
    """The runs' timers, each SD run with its cuts (`reductions`) beside them."""
    cut = reductions(sim)
    cut = pd.DataFrame({"run": cut["model"] + "/rtn/" + cut["reading"],
                        "rollout_cut_pct": cut["rollout_s"], "step_cut_pct": cut["step_s"]})
    return sim.merge(cut, on="run", how="left")


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
                CONFIG, pct, pct, float(best[metric].max()), TOL, reading=reading))
    return out
