"""`rolloutbench validate`: the same systems live and on the simulator, compared.

Each system runs live (vLLM, torch, real verifiers) and then on the simulator
with this machine's measured calibration (`cpu-live`, from `rolloutbench
calibrate engine`), the tiny model's shapes and the `arith` profile measured
on the live model's answers: same workload, same seed, same sizes. The table
gives each metric's round mean on both sides and the relative error.
"""

from __future__ import annotations

import copy
import statistics
from pathlib import Path

import pandas as pd

from harness.config import RunConfig
from harness.results import execute, write_atomic

METRICS = ("rollout_to_train_end_s", "first_dispatch_s", "waiting_ratio", "rollout_complete_s")


def sim_twin(live: RunConfig) -> RunConfig:
    """The simulated configuration of a live run on this machine."""
    cfg = copy.deepcopy(live)
    cfg.runtime = "sim"
    s = cfg.sim
    # the calibration measured on the same deployment: one process, or Ray actors
    deployed = "cpu-live" if live.live.ray_address == "off" else "cpu-live-ray"
    s.calibration, s.model, s.rollout_gpu, s.trainer_gpu = (deployed, "tiny-qwen3",
                                                           "cpu-2core", "cpu-2core")
    s.rollout_tp, s.rollout_engines, s.trainer_gpus = 1, 1, 1
    s.placement, s.micro_batch_tokens = "disaggregated", 1 << 20
    return cfg


def validate(systems: list[str], base: RunConfig, out: Path) -> pd.DataFrame:
    out.mkdir(parents=True, exist_ok=True)
    from harness.live.ray_actors import session

    rows = []
    with session(base.live.ray_address):
        for system in systems:
            live = copy.deepcopy(base)
            live.system, live.runtime = system, "live"
            live_rows = execute(live.validate(), out / f"{system}-live.jsonl")
            sim_rows = execute(sim_twin(live).validate(), out / f"{system}-sim.jsonl")
            for metric in METRICS:
                a = statistics.fmean(r[metric] for r in live_rows)
                b = statistics.fmean(r[metric] for r in sim_rows)
                rows.append({"system": system, "metric": metric, "live": a, "sim": b,
                             "rel_error": abs(b - a) / abs(a) if a else float("nan")})
    df = pd.DataFrame(rows)
    write_atomic(out / "validate.csv", df.to_csv(index=False, float_format="%.6g"))
    return df
