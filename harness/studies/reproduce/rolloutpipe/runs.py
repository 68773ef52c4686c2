"""RolloutPipe's setup and its simulated runs: the grid and the frontier what-if.

Every knob the paper depends on is set in `base_config`, not left to defaults,
so that a change of a default elsewhere leaves the reproduction alone. The
claims (`claims`), the figures (`figures`) and the would-need family
(`would_need`) all run or read these.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd

from harness.core.config import RunConfig
from harness.studies.reproduce.grid import grid_frame, grid_tasks, run_configs

PAPER = "rolloutpipe"
WORKLOADS = ("lsat-ar", "sci-xw", "sci-jl", "olyphys")
GROUPS = (32, 64, 96)
SYSTEMS = ("slime", "cgp", "cgp-fgd")
# FGD's two readings in the paper (systems/cgp_fgd.py cites both): "cap", Sec. 3.3
# Eq. 6 "admitted ... if and only if its group belongs to the frontier"; "priority",
# Sec. 1 "an admission policy that prioritizes requests for the F_w frontier groups".
# The grid runs CGP+FGD once per reading; Slime and CGP have one reading ("").
READINGS = ("cap", "priority")


def base_config(seed: int, rounds: int) -> RunConfig:
    """The paper's setup, every knob it depends on set here (not left to defaults).

    Two of its inputs are assumptions the paper does not give: the response cap
    (`max_response_tokens=0` takes each profile's 8,192 tokens, slime's
    --rollout-max-response-len in its Qwen3 example scripts; the paper gives none)
    and the spread of response lengths between prompts (each profile's
    `sigma_between`; the paper reports only the mean length, 3.3k-3.6k, Sec. 5.3)."""
    cfg = RunConfig(seed=seed, rounds=rounds, group_size=8, update_groups=2, frontier=2,
                    frontier_mode="cap",
                    max_response_tokens=0)  # 0: each workload profile's own cap (assumed)
    s = cfg.sim
    s.calibration, s.model, s.rollout_gpu, s.rollout_tp = PAPER, "qwen3-1.7b", \
        "a100-40gb-pcie", 2
    s.rollout_engines, s.placement, s.trainer_gpu, s.trainer_gpus = 1, "disaggregated", \
        "rtx-4090", 8
    # Sec. 5.1: "The training side employs 8 x RTX 4090 24GB GPUs with TP=4, DP=2" (the
    # kernel trainer prices TP=4's collectives over the 4090's host-staged PCIe)
    s.trainer_tp = 4
    s.engine_backend = "sglang"  # slime serves with SGLang
    return cfg


def simulate(rounds: int = 4, seed: int = 0, traces: Path | None = None,
             progress: bool = True, workloads: tuple[str, ...] = WORKLOADS,
             groups: tuple[int, ...] = GROUPS, priority: bool = True) -> pd.DataFrame:
    """The grid: the three systems (CGP+FGD in the cap reading), then CGP+FGD in the
    priority reading unless `priority` is off (the would-need search reads only the
    cap's rows); a `reading` column tells CGP+FGD's rows apart ("" for the
    others). The cap reading's runs and traces are those of the grid before the
    reading existed (same configs, same trace names)."""
    traces = traces or Path("runs") / PAPER
    base = base_config(seed, rounds)
    tasks = grid_tasks(base, {"workload": workloads, "groups": groups, "system": SYSTEMS},
                       traces)
    prio = copy.deepcopy(base)
    prio.system, prio.frontier_mode = "cgp-fgd", "priority"
    tasks_p = grid_tasks(prio, {"workload": workloads, "groups": groups},
                         traces / "fgd-priority") if priority else []
    runs = run_configs(tasks + tasks_p, "RolloutPipe grid", progress)
    cap = grid_frame(tasks, runs[:len(tasks)])
    cap["reading"] = cap["system"].map(lambda s: "cap" if s == "cgp-fgd" else "")
    if not tasks_p:
        return cap
    priority = grid_frame(tasks_p, runs[len(tasks):]).assign(reading="priority")
    return pd.concat([cap, priority], ignore_index=True)


FRONTIERS = (1, 2, 4, 8, 16, 32, 64)


def frontier_sweep(rounds: int = 4, seed: int = 0, traces: Path | None = None,
                   progress: bool = True) -> pd.DataFrame:
    """CGP+FGD at R=96 for a range of frontier widths (not a paper claim: a what-if
    that shows where frontier admission helps and where it starves the engine)."""
    traces = traces or Path("runs") / f"{PAPER}-frontier"
    base = base_config(seed, rounds)
    base.system, base.groups = "cgp-fgd", 96
    grids = []  # every width's runs at once (side by side in `reproduce`'s pool)
    for fw in FRONTIERS:
        base.frontier = fw
        grids.append(grid_tasks(base, {"workload": WORKLOADS}, traces / f"fw{fw}"))
    runs = run_configs([task for grid in grids for task in grid], "frontier sweep", progress)
    rows, at = [], 0
    for fw, grid in zip(FRONTIERS, grids, strict=True):
        rows.append(grid_frame(grid, runs[at:at + len(grid)]).assign(frontier=fw))
        at += len(grid)
    return pd.concat(rows, ignore_index=True)
