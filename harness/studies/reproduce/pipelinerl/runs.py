"""PipelineRL's setup and its simulated runs, and the U(h) its Appendix A model uses.

The paper's setup on the simulator: Qwen2.5-7B on 128 H100s, B = 1024 samples
per step (K=8, U=128), OpenReasoner-Zero math up to 32k tokens. PipelineRL: 48
generation GPUs at H=64 and 80 training GPUs, weights installed in flight after
every step. Conventional RL with G steps per rollout: all 128 GPUs generate
B x G samples, then all 128 train (colocated). A run is kept as its summary
(throughput, ESS, lag), made where it ran.

How long PipelineRL runs: the paper trains "for 1024 optimizer steps with the batch
size B = 1024" (Sec. 5, Experimental setup) and reports that "some tokens have a lag
of more than 50k samples" (Sec. 5, "PipelineRL stays more on-policy"). A run of S
steps cannot show a lag above S - 1 steps, so 32 steps (the 4 rounds used before)
capped it at 31,744 samples whatever the system did. `PIPE_ROUNDS` rounds of 8 steps
(96 steps) allow 95 steps (97,280 samples), about twice the paper's 50k and far above
where the simulated lag settles (54-56 steps in a 192-step probe: the time to decode
a 32k-token response over the step time), so the run length no longer decides the row.
1024 steps would cost ~10x more for the same verdict.

Lag (the trace's `lag_max`, `harness.core.offpolicy`): optimizer steps between the
version that generated a token and the version being updated, times B = 1,024 samples
per step. The authors' code logs the same in samples: `stats/lag` =
last_broadcasted_version - the step's oldest `model_version`
(ServiceNow/PipelineRL@58d39345:pipelinerl/finetune_loop.py:881), a version is the
trainer's sample count at a broadcast (finetune_loop.py:949, after every step:
conf/finetune/base.yaml:94, weight_update_interval 1) and a rollout keeps the version
current when it starts (pipelinerl/actor.py:186): the harness takes the version of a
response's first token, the same when requests do not queue in the engine (the actor
here starts a group only when K of its H slots are free).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from harness.core.config import RunConfig
from harness.core.trace_io import trace_file
from harness.run.execute import reads
from harness.studies.analytic import pipelinerl as analytic
from harness.studies.reproduce.grid import run_configs

PAPER = "pipelinerl"
G_VALUES = (8, 16, 32)
B_GROUPS = 128  # 1024 samples per optimizer step at K=8
PIPE_ROUNDS = 12  # rounds of 8 steps: 96 optimizer steps (see the module's docstring)


def base(system: str, seed: int) -> RunConfig:
    cfg = RunConfig(system=system, workload="orz-math", seed=seed, group_size=8,
                    update_groups=B_GROUPS, max_response_tokens=32768)
    s = cfg.sim
    s.calibration, s.model, s.rollout_gpu, s.rollout_tp = PAPER, "qwen2.5-7b", "h100-sxm", 1
    s.trainer_gpu, s.engine_backend = "h100-sxm", "vllm"  # PipelineRL serves with vLLM
    # A micro-batch is PipelineRL's packed sequence, finetune.seq_length (seq_packing: true;
    # ServiceNow/PipelineRL@58d39345:conf/finetune/base.yaml:63-64), and the paper ran with
    # a "maximum sequence length of 32k" (Sec. 5, Experimental setup): 32,768 here. The
    # authors' configs also write 32k as 32000 (conf/tir.yaml:85): docs/reproductions.md
    # gives what that reading changes.
    s.micro_batch_tokens = 32768
    return cfg


def configs(seed: int) -> dict[str, RunConfig]:
    out = {}
    pipe = base("pipelinerl", seed)
    pipe.groups, pipe.rounds, pipe.concurrency = 8 * B_GROUPS, PIPE_ROUNDS, 64
    pipe.max_lag = -1  # none: conf/base.yaml:106, max_lag: null
    pipe.sim.rollout_engines, pipe.sim.trainer_gpus = 48, 80
    out["pipelinerl"] = pipe
    for g in G_VALUES:
        conv = base("slime", seed)
        conv.groups, conv.rounds = g * B_GROUPS, 1
        conv.sim.placement, conv.sim.rollout_engines = "colocated", 128
        out[f"conventional G={g}"] = conv
    return out


def summarise(name: str, events: list[dict]) -> dict[str, float]:
    """Sample throughput, ESS and max lag of one run, from its trace."""
    steps = [e for e in events if e["ev"] == "optimizer_step"]
    samples = 8 * B_GROUPS
    if name == "pipelinerl":  # steady state: skip the first round's fill and the last's drain
        per_round = len(steps) // len([e for e in events if e["ev"] == "rollout_start"])
        a, b = steps[per_round - 1], steps[-per_round - 1]
        throughput = (b["step"] - a["step"]) * samples / (b["t"] - a["t"])
    else:
        throughput = len(steps) * samples / steps[-1]["t"]
    return {
        "system": name,
        "samples_per_s": throughput,
        "ess_mean": float(np.mean([e["ess"] for e in steps])),
        "ess_min": float(np.min([e["ess"] for e in steps])),
        "lag_max_steps": float(max(e["lag_max"] for e in steps)),
        "lag_max_samples": float(max(e["lag_max"] for e in steps)) * samples,
    }


def simulate(seed: int, traces: Path, progress: bool = True) -> pd.DataFrame:
    runs = configs(seed)
    tasks = []
    for name, cfg in runs.items():
        folder = traces / name.replace(" ", "_").replace("=", "")  # made if kept (execute)
        tasks.append((cfg.validate(), trace_file(folder, cfg.system)))
    summaries = run_configs(tasks, label="PipelineRL", progress=progress, reader=summary)
    return pd.DataFrame([{**summary, "system": name}
                         for name, summary in zip(runs, summaries, strict=True)])


@reads("run_start", "rollout_start", "optimizer_step")
def summary(events: list[dict]) -> dict[str, float]:
    """`summarise` of a run's events (PipelineRL's steady state, by its system)."""
    return summarise(events[0]["system"], events)


def utilisation() -> analytic.Util:
    """Appendix A's U(h): measured (aiconfigurator-core's H100 GEMM table for the
    paper's shape), as the engine's step times are; the roofline's in the claims'
    roofline twin."""
    from harness.studies.reproduce.pool import step_model_override

    if step_model_override() == "roofline":
        return analytic.utilisation
    from harness.studies.validate.gpu.appendix_a import measured_utilisation

    return measured_utilisation()
