"""What the simulator predicts on the nearest readable configuration of the papers that cannot
be read in full: marked as such in the results (`spec-papers_nearest.csv`), never a claim.

TLT (arXiv 2511.16665), from its authors' single-node script, mit-han-lab/fastrl@bce3df7a:
examples/grpo_7B.sh: Qwen2.5-7B (:10), 64 prompts x 8 samples (:14-15), mini-batches of 4
prompts (:16: 16 optimizer steps a round), prompts to 1,024 and responses to 32,768 tokens
(:17-18), SGLang at TP 4 on 8 GPUs (:58-59, :75-76: two engines), `gpu_memory_utilization`
0.4 (:62), speculation only at batches of 32 or fewer (:28, `bs_threshold`; the engine turns it
off above, third-party/sglang/python/sglang/srt/managers/scheduler.py:2214-2218); an EAGLE
drafter (:12), one decoder layer over the policy's features and its LM head, priced as the
simulator's `mtp` drafter (the same parts), 8 steps deep (verl/trainer/config/
fastrl_trainer.yaml:12). Missing: the GPU (not in the scripts; the paper's evaluation is not
reachable here): H100 is assumed; the acceptance (SkyRL's alpha); the tree (top-k 4, 48
verified tokens, :13-14, and the bandit's smaller trees, :16-17): a chain of 7 drafted tokens
(8 verified, the smallest tree's count) stands in; Eurus-2-RL-Data's lengths (orz-math's).

FastGRPO (arXiv 2509.21792): only the qualitative claim is readable (a speculative step's
speedup below 1x at high concurrency): the simulator's speculative step for Qwen2.5-7B on one
H100 (vLLM, TP 1) with an EAGLE-like drafter (FastGRPO's draft model learns from the
policy's hidden states), by depth and batch, and where it stops paying.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.config import RunConfig
from harness.studies.reproduce.skyrl_spec.runs import ALPHA
from harness.studies.reproduce.spec_papers.runs import crossover, simulate

TLT = {"prompts": 64, "samples": 8, "mini_batch": 4, "max_response": 32768, "engines": 2,
       "engine_tp": 4, "mem": 0.4, "bs_threshold": 32, "spec_tokens": 7}
TLT_RUNS = ("baseline", "tlt", "tlt-always-on")
FASTGRPO_DEPTHS = (3, 7)
FASTGRPO_BATCHES = (1, 32, 256, 1024)
CONTEXT = 1024  # tokens a sequence of the steps shown


def tlt_config(run: str, seed: int = 0) -> RunConfig:
    """TLT's single-node run on the simulator: the baseline (verl, no speculation), TLT's
    speculation as its script sets it, or the same always on."""
    cfg = RunConfig(system="verl", workload="orz-math", seed=seed, group_size=TLT["samples"],
                    groups=TLT["prompts"], update_groups=TLT["mini_batch"], rounds=4,
                    max_response_tokens=TLT["max_response"])
    s = cfg.sim
    s.calibration, s.model, s.engine_backend = "spec-papers", "qwen2.5-7b", "sglang"
    s.rollout_gpu = s.trainer_gpu = "h100-sxm"  # assumed: the scripts name no GPU
    s.rollout_engines, s.rollout_tp = TLT["engines"], TLT["engine_tp"]
    s.placement, s.mem_fraction = "colocated", TLT["mem"]
    if run != "baseline":
        s.spec_drafter, s.spec_tokens, s.spec_acceptance = "mtp", TLT["spec_tokens"], ALPHA
        s.spec_max_batch = TLT["bs_threshold"] if run == "tlt" else 0
    return cfg


def fastgrpo_steps() -> list[dict[str, object]]:
    """Per depth: one speculative step's speedup at a few batches of 1,024-token sequences,
    and the largest batch at which it still pays."""
    from harness.studies.steps import step_rows

    rows: list[dict[str, object]] = []
    for k in FASTGRPO_DEPTHS:
        cfg = RunConfig()
        s = cfg.sim
        s.model, s.rollout_gpu, s.rollout_tp, s.engine_backend = (
            "qwen2.5-7b", "h100-sxm", 1, "vllm")
        s.spec_drafter, s.spec_tokens, s.spec_acceptance = "mtp", k, ALPHA
        for r in step_rows(s, list(FASTGRPO_BATCHES), [CONTEXT]):
            rows.append({"paper": "FastGRPO", "what": f"speculative step's speedup, k={k}, "
                         f"batch {r['batch']}", "value": r["speedup"]})
        rows.append({"paper": "FastGRPO", "what": f"largest batch (of 1..4,096) up to which a "
                     f"speculative step pays, k={k}", "value": crossover(s, CONTEXT)})
    return rows


def nearest(seed: int, traces: Path) -> pd.DataFrame:
    """Every nearest-configuration prediction, one row each: paper, what, value."""
    sim = simulate([(f"tlt/{r}", tlt_config(r, seed)) for r in TLT_RUNS], traces,
                   label="spec papers (nearest)").set_index("run")
    base = sim.loc["tlt/baseline"]
    rows = []
    for run in TLT_RUNS:
        for metric in ("rollout_s", "step_s"):
            rows.append({"paper": "TLT", "what": f"{run} {metric}",
                         "value": sim.loc[f"tlt/{run}", metric]})
    for run in TLT_RUNS[1:]:
        rows.append({"paper": "TLT", "what": f"{run} end-to-end speedup (step)",
                     "value": base["step_s"] / sim.loc[f"tlt/{run}", "step_s"]})
    return pd.DataFrame(rows + fastgrpo_steps()).assign(
        kind="nearest configuration, not a claim")
