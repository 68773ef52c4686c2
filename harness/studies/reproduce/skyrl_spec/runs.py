"""SkyRL's speculative-decoding example: its setup, the two simulated runs and their steps.

The example (NovaSky-AI/SkyRL@a9564572:docs/content/docs/examples/spec_decode.mdx:121-137)
runs DAPO on dapo-math-17k with Qwen3.5-9B on one 8xH100 node, once without and once with
the policy's MTP head drafting k = 3 tokens in vLLM; "the runs differ only in the MTP
switch" (:121). Its script, examples/train/spec_decode/run_megatron_dapo_qwen3.5_9b_specdecode.sh
at the same commit, gives the setup (`SCRIPT`, line by line); here each is set as the
simulator reads it:

- 8 vLLM engines at TP 1 (:17-18), round-robin (the doc's router, :123), eager (:45),
  `gpu_memory_utilization` 0.5 (:155), colocated with the trainer (:109);
- 32 prompts x 8 samples a step, one mini-batch of 32 (:41-43): one optimizer step a round;
- responses up to 8,192 tokens (:38), prompts up to 2,048 (:37);
- Megatron TP 4 (:53), one sample a micro-batch (:139).

SkyRL's synchronous trainer generates, then trains, then syncs weights, one step after the
other (skyrl/train/trainer.py:342 `step`, :361 `generate`, :1569 `policy_train`, :493
`sync_weights`): the simulator's colocated synchronous `verl` runs the same loop, and its
round's spans are read as SkyRL's timers (`summary`).

What cannot be set: Qwen3.5-9B (its gated-delta-net layers are refused by the simulator;
Qwen3-8B, the same hidden width, stands in); SkyRL's response lengths (unpublished: the
dapo-math-17k profile's are APRIL's Qwen3-4B/8B fit); the MTP head's training (the
simulated trainer has no draft loss, so a speculative run trains exactly what the plain
one does).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.core.config import RunConfig
from harness.core.trace_io import trace_file
from harness.run.execute import reads
from harness.sim.speculative import alpha_for
from harness.studies.reproduce.grid import run_configs

PAPER = "skyrl-spec"
ROUNDS = 4  # the first round's engines start awake (no hand-over): left out of the means
# The script's values (run_megatron_dapo_qwen3.5_9b_specdecode.sh at a9564572), by line.
SCRIPT = {"engines": 8, "engine_tp": 1, "max_response": 8192, "max_prompt": 2048,
          "prompts": 32, "mini_batch": 32, "samples": 8, "eager": True, "spec_tokens": 3,
          "colocated": True, "mem_fraction": 0.5, "trainer_tp": 4}
MEAN_ACCEPTED = 3.32  # spec_decode.mdx:137, "a mean accepted length of 3.32 tokens"
ALPHA = round(alpha_for(MEAN_ACCEPTED, SCRIPT["spec_tokens"]), 4)  # 0.8769: the one input
RUNS = ("baseline", "mtp")


def config(run: str, seed: int = 0) -> RunConfig:
    """One of the two runs: the script's setup, speculation off (baseline) or MTP."""
    cfg = RunConfig(system="verl", workload="dapo-math-17k", seed=seed,
                    group_size=SCRIPT["samples"], groups=SCRIPT["prompts"],
                    update_groups=SCRIPT["mini_batch"], rounds=ROUNDS,
                    max_response_tokens=SCRIPT["max_response"])
    s = cfg.sim
    s.calibration, s.model, s.rollout_gpu, s.trainer_gpu = PAPER, "qwen3-8b", "h100-sxm", "h100-sxm"
    s.rollout_engines, s.rollout_tp = SCRIPT["engines"], SCRIPT["engine_tp"]
    s.placement, s.mem_fraction = "colocated", SCRIPT["mem_fraction"]
    s.engine_backend, s.engine_eager, s.dispatch = "vllm", SCRIPT["eager"], "round-robin"
    s.trainer_tp = SCRIPT["trainer_tp"]
    # micro_train_batch_size_per_gpu=1 (:139), no packing (:86): a micro-batch holds one
    # sample, at most a full prompt and response
    s.micro_batch_tokens = SCRIPT["max_prompt"] + SCRIPT["max_response"]
    if run == "mtp":
        s.spec_drafter, s.spec_tokens, s.spec_acceptance = "mtp", SCRIPT["spec_tokens"], ALPHA
    return cfg


@reads("run_start", "rollout_start", "rollout_complete", "train_start", "optimizer_step",
       "run_end")
def summary(events: list[dict[str, Any]]) -> dict[str, float]:
    """Mean seconds a round (the first left out) of SkyRL's three timers: `generate`, the
    round's rollout_start to rollout_complete (rewards included, as SkyRL's generator
    scores in `generate`); `policy_train`, train_start to the optimizer step; `step`, one
    rollout_start to the next (the last to the run's end)."""
    def times(kind: str) -> list[float]:
        return [e["t"] for e in events if e["ev"] == kind]

    starts, done = times("rollout_start"), times("rollout_complete")
    train, opt = times("train_start"), times("optimizer_step")
    edges = [*starts, events[-1]["t"]]
    return {"rollout_s": float(np.mean(np.subtract(done, starts)[1:])),
            "train_s": float(np.mean(np.subtract(opt, train)[1:])),
            "step_s": float(np.mean(np.diff(edges)[1:])),
            "rounds": float(len(starts) - 1)}


def simulate(seed: int, traces: Path, progress: bool = True) -> pd.DataFrame:
    """The baseline and MTP runs, one row each: their mean rollout, train and step seconds."""
    tasks = []
    for run in RUNS:
        folder = traces / run  # made only if the traces are kept (execute)
        tasks.append((config(run, seed).validate(), trace_file(folder, "verl")))
    rows = run_configs(tasks, label="SkyRL spec", progress=progress, reader=summary)
    return pd.DataFrame([{"run": run, **row} for run, row in zip(RUNS, rows, strict=True)])
