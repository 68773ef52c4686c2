"""PipelineRL vs conventional RL: the Appendix A model and a simulated Fig. 5c / Fig. 6.

Appendix A is computed by `harness.studies.analytic.pipelinerl`, with U(h) measured
(aiconfigurator-core's H100 GEMM table) or, in the claims' roofline twin, our roofline.
The simulation puts the paper's setup on the simulator: Qwen2.5-7B on 128
H100s, B = 1024 samples per step (K=8, U=128), OpenReasoner-Zero math up to
32k tokens. PipelineRL: 48 generation GPUs at H=64 and 80 training GPUs,
weights installed in flight after every step. Conventional RL with G steps per
rollout: all 128 GPUs generate B x G samples, then all 128 train (colocated).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from harness.core.config import RunConfig
from harness.core.files import write_atomic
from harness.core.plots import save_figure
from harness.studies.analytic import pipelinerl as analytic
from harness.studies.claims import Claim
from harness.studies.reproduce.grid import run_configs

PAPER = "pipelinerl"
G_VALUES = (8, 16, 32)
B_GROUPS = 128  # 1024 samples per optimizer step at K=8
APPENDIX = {  # the paper's Appendix A.4 case study (predictions of our U(h) model)
    "speedup": 1.57, "g_max": 133, "H": 192, "I": 44, "pipe_gen": 16.9, "pipe_train": 17.08,
    "pipe_total": 16.9, "conv_gen": 18.3, "conv_train": 26.02, "conv_total": 10.7,
}
THROUGHPUT_RATIO_G32 = 2.0  # Fig. 5c: PipelineRL generates samples ~2x faster than G=32
MAX_LAG_SAMPLES = 50_000  # Sec. 5: some PipelineRL tokens lag more than 50k samples


def base(system: str, seed: int) -> RunConfig:
    cfg = RunConfig(system=system, workload="orz-math", seed=seed, group_size=8,
                    update_groups=B_GROUPS, max_response_tokens=32768)
    s = cfg.sim
    s.calibration, s.model, s.rollout_gpu, s.rollout_tp = PAPER, "qwen2.5-7b", "h100-sxm", 1
    s.trainer_gpu, s.engine_backend = "h100-sxm", "vllm"  # PipelineRL serves with vLLM
    s.micro_batch_tokens = 65536
    return cfg


def configs(seed: int) -> dict[str, RunConfig]:
    out = {}
    pipe = base("pipelinerl", seed)
    pipe.groups, pipe.rounds, pipe.concurrency, pipe.max_lag = 8 * B_GROUPS, 4, 64, -1
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
        folder = traces / name.replace(" ", "_").replace("=", "")
        folder.mkdir(parents=True, exist_ok=True)
        tasks.append((cfg.validate(), folder / f"{cfg.system}.jsonl"))
    summaries = run_configs(tasks, label="PipelineRL", progress=progress, reader=summary)
    return pd.DataFrame([{**summary, "system": name}
                         for name, summary in zip(runs, summaries, strict=True)])


def summary(events: list[dict]) -> dict[str, float]:
    """`summarise` of a run's events (PipelineRL's steady state, by its system)."""
    return summarise(events[0]["system"], events)


def claims(sim: pd.DataFrame, case: dict[str, float]) -> list[Claim]:
    out = [Claim(PAPER, f"Appendix A: {key}", key, "N=128 B=128 L=32k", v, v, case[key],
                 0.10) for key, v in APPENDIX.items()]
    by = sim.set_index("system")
    pipe = by.loc["pipelinerl"]
    ratio = pipe["samples_per_s"] / by.loc["conventional G=32"]["samples_per_s"]
    out.append(Claim(PAPER, "sample throughput PipelineRL / conventional G=32", "samples_per_s",
                     "Qwen2.5-7B 128xH100", THROUGHPUT_RATIO_G32, THROUGHPUT_RATIO_G32, ratio,
                     0.15))
    ess8 = by.loc["conventional G=8"]["ess_mean"]
    out.append(Claim(PAPER, "ESS PipelineRL / ESS G=8 (similar)", "ess", "mean over steps",
                     0.97, 1.03, pipe["ess_mean"] / ess8, 0.0))
    order = float(by.loc["conventional G=32"]["ess_mean"] < by.loc["conventional G=16"][
        "ess_mean"] < ess8)
    out.append(Claim(PAPER, "ESS falls with G: G=32 < G=16 < G=8 (1 = holds)", "ess",
                     "mean over steps", 1.0, 1.0, order, 0.0))
    out.append(Claim(PAPER, "PipelineRL max lag (samples)", "lag_max", "B=1024",
                     MAX_LAG_SAMPLES, math.inf, pipe["lag_max_samples"], 0.0))
    return out


def figure(sim: pd.DataFrame, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    colors = ["#dd8452"] + ["#4c72b0"] * len(G_VALUES)
    names = [s.replace("conventional ", "conventional\n") for s in sim["system"]]
    axes[0].bar(names, sim["samples_per_s"], color=colors)
    axes[0].set_ylabel("sample throughput (samples/s)")
    axes[0].set_title("sample throughput (cf. Fig. 5c)", fontsize=10)
    axes[1].bar(names, sim["ess_mean"], color=colors)
    axes[1].set_ylim(min(0.9, float(sim["ess_mean"].min()) - 0.01), 1.0)
    axes[1].set_ylabel("ESS (fraction of the batch)")
    axes[1].set_title("mean effective sample size per step (cf. Fig. 6b)", fontsize=10)
    for ax in axes:
        ax.tick_params(axis="x", labelsize=8)
        ax.set_xlabel("system (G: optimizer steps per rollout)")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Simulated PipelineRL vs conventional RL (Qwen2.5-7B, 128 H100, 1024 samples "
                 "per step)", fontsize=10, y=1.03)
    save_figure(fig, path)


def utilisation() -> analytic.Util:
    """Appendix A's U(h): measured (aiconfigurator-core's H100 GEMM table for the
    paper's shape), as the engine's step times are; the roofline's in the claims'
    roofline twin."""
    from harness.studies.reproduce.pool import step_model_override

    if step_model_override() == "roofline":
        return analytic.utilisation
    from harness.studies.validate.gpu.appendix_a import measured_utilisation

    return measured_utilisation()


def reproduce(out: Path, figures: Path, rounds: int = 4, seed: int = 0) -> list[Claim]:
    """Appendix A and the simulated comparison; `rounds` is fixed by the setup."""
    util = utilisation()
    res = analytic.search(util=util)
    case = analytic.case_study(res=res, util=util)
    figures.mkdir(parents=True, exist_ok=True)
    analytic.figure8(figures / "pipelinerl_fig8_utilisation.png")
    analytic.figure9(figures / "pipelinerl_fig9_analytic.png", res)
    sim = simulate(seed, Path("runs") / PAPER)
    write_atomic(out / "pipelinerl.csv", sim.to_csv(index=False, float_format="%.6g"))
    write_atomic(out / "pipelinerl_appendix_a.csv",
                 pd.DataFrame([case]).to_csv(index=False, float_format="%.6g"))
    figure(sim, figures / "pipelinerl_throughput_ess.png")
    return claims(sim, case)
