"""RollPacker's setup and its simulated runs: the periods behind Tables 2 and 3 and Fig. 11.

Setup as in the paper: Qwen2.5-7B/14B/32B with response caps 8k/16k/32k on
16/32/64 H800s (rollout TP 1/2/2), colocated, P0=128 prompts x R0=8 responses,
one optimizer step per rollout, the mixed math/code/judge workload (`rp-mix`).
The baseline is veRL (generate, then a reward stage, then train). Every run
covers whole periods of its tail-batching schedule (`period`): a system's step
time is the run's wall time over its rounds (`breakdown`, made where the run
was). Each table is a list of labelled runs, so that all of them go to
`reproduce`'s pool at once.

Readings (each cited where it is used, and in docs/reproductions.md's RollPacker reading):
- lengths at 32B/32k (`LENGTHS`): the 14B/16k distribution reused, or scaled to
  the 32k cap;
- the reward scheduler's anchor (`ANCHORS`): kept for the whole run, or fresh
  at each step.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from harness.core.config import RunConfig
from harness.core.trace_io import trace_file
from harness.run.execute import reads
from harness.sim.calibration import load as calibration_file
from harness.studies.reproduce.grid import run_configs

PAPER = "rollpacker"
P0 = 128
SIZES = {  # name: model, cap, GPUs, TP
    "7B/8k": ("qwen2.5-7b", 8192, 16, 1),
    "14B/16k": ("qwen2.5-14b", 16384, 32, 2),
    "32B/32k": ("qwen2.5-32b", 32768, 64, 2),
}
STAGES = ("tail batching", "+ reward scheduler", "+ parallelism planner", "+ stream trainer")
# Table 3's rows: where the stream trainer starts (None: it is off; 0.0: adaptive)
STREAM_AT = {"none": None, "20%": 0.2, "30%": 0.3, "40%": 0.4, "adaptive": 0.0}
# Sec. 6.6: "Since short rounds involve less frequent GPU scaling, we report the average
# speedup over five long rounds": five periods of eta 1.25's schedule.
TABLE3_LONG_ROUNDS = 5
# Fig. 11's etas; Sec. 6.3: "Each bar represents the average iteration time of a full
# period of consecutive short and long rounds".
ETAS = (1.0, 1.25, 1.5)
# Sec. 6.7: "We scale the batch size from 128 to 512 along with the corresponding
# computational resources" (14B/16k, "utilizing up to 128 GPUs"): prompts per GPUs.
SCALE_PROMPTS = {32: 128, 64: 256, 128: 512}
# 32B/32k lengths. Sec. 2.2 gives lengths for Qwen2.5-14B at a 16k cap only ("the
# 75th percentile (P75) ranging between 755 and 1.1k tokens, the longest responses
# can extend up to 16k tokens"): reused at 32k, or stretched to the 32k cap.
LENGTHS = {"16k lengths": "rp-mix", "32k-scaled lengths": "rp-mix-32k"}
# Sec. 4.3: "For each test case, it tracks the maximum execution time among correct
# responses during training": an anchor kept across steps, or one fresh each step.
ANCHORS = {"persistent anchor": "run", "fresh anchor": "step"}
# Where the second anchor reading runs: 7B/8k, the setting of the paper's own adaptive-
# timeout experiment (Sec. 6.5, Fig. 13c). At 14B/16k and 32B/32k both readings gave
# the same Table 2 speedups to four digits (docs), so they run the first one only: the
# two would add nine runs to the reproduction for nothing new.
BOTH_ANCHORS = ("7B/8k",)


def schedule(eta_p: float, p0: int = P0) -> list[str]:
    """The round kinds of one period of tail batching with eta_p on prompts: each
    short round defers ceil(eta_p x P0) - P0 prompts, a long round runs when P0 wait
    (systems.rollpacker). The period ends when the queue is empty again."""
    deferred = math.ceil(eta_p * p0) - p0
    if deferred <= 0:
        return ["short"]
    kinds, queue = [], 0
    while True:
        if queue >= p0:
            kinds.append("long")
            queue -= p0
            if queue == 0:
                return kinds
        else:
            kinds.append("short")
            queue += deferred


def period(eta_p: float, p0: int = P0) -> int:
    """Rounds in one period of the schedule: 5 at eta 1.25, 3 at 1.5, 1 without."""
    return len(schedule(eta_p, p0))


def common_period(etas: tuple[float, ...] = ETAS, p0: int = P0) -> int:
    """A number of rounds that is whole periods of every eta compared (15 for Fig. 11)."""
    return math.lcm(*(period(e, p0) for e in etas))


ROUNDS = period(1.25)  # Table 2 and the scaling runs: one period at eta 1.25


def config(size: str, system: str, stage: int = 4, seed: int = 0, workload: str = "rp-mix",
           calibration: str = PAPER, anchor: str = "run") -> RunConfig:
    """`stage` counts the RollPacker components switched on, in Table 2's order."""
    model, cap, gpus, tp = SIZES[size]
    cfg = RunConfig(system=system, workload=workload, seed=seed, rounds=ROUNDS, groups=P0,
                    update_groups=P0, group_size=8, max_response_tokens=cap,
                    rollpacker_tail_batching=stage >= 1, rollpacker_reward_scheduler=stage >= 2,
                    rollpacker_planner=stage >= 3, rollpacker_stream_trainer=stage >= 4,
                    rollpacker_speculation=1.25, rollpacker_response_speculation=1.25,
                    rollpacker_stream_at=0.0, rollpacker_anchor=anchor)
    s = cfg.sim
    s.calibration, s.model, s.rollout_gpu, s.trainer_gpu = calibration, model, "h800-sxm", \
        "h800-sxm"
    s.rollout_tp, s.rollout_engines, s.placement = tp, gpus // tp, "colocated"
    s.engine_backend = "vllm"  # veRL, RollPacker's base, serves with vLLM
    s.verifier_workers = verifier_workers(calibration)
    return cfg


def verifier_workers(calibration: str = PAPER) -> int:
    """Reward checks at once at 32 GPUs, as calibrated (fitted to veRL's reward share)."""
    data = calibration_file(calibration)
    return int({**data.get("fixed", {}), **data.get("fit", {})}.get("verifier_workers", 64))


def scaled(size: str, system: str, gpus: int, seed: int = 0, anchor: str = "run") -> RunConfig:
    """`size` on `gpus` GPUs with the batch and the reward workers scaled with them
    (Sec. 6.7): SCALE_PROMPTS[gpus] prompts, one optimizer step per rollout."""
    cfg = config(size, system, 4, seed, anchor=anchor)
    factor = gpus / SIZES[size][2]
    cfg.groups = cfg.update_groups = SCALE_PROMPTS[gpus]
    cfg.sim.rollout_engines = round(cfg.sim.rollout_engines * factor)
    cfg.sim.verifier_workers = round(cfg.sim.verifier_workers * factor)
    return cfg


def reading_of(size: str, stage: int, lengths: str, anchor: str) -> str:
    """A Table 2 row's reading: the lengths at 32B/32k, the anchor where rewards are
    scheduled (stage 2 on); "" where neither applies."""
    parts = [lengths] if size == "32B/32k" else []
    if stage >= 2:
        parts.append(anchor)
    return ", ".join(parts)


def table2_config(size: str, stage: int, seed: int = 0, lengths: str = "16k lengths",
                  anchor: str = "persistent anchor") -> RunConfig:
    """A Table 2 run (stage 0: veRL) in the given readings."""
    workload = LENGTHS[lengths] if size == "32B/32k" else "rp-mix"
    if stage == 0:
        return config(size, "verl", seed=seed, workload=workload)
    return config(size, "rollpacker", stage, seed, workload=workload, anchor=ANCHORS[anchor])


def run(cfg: RunConfig, name: str, traces: Path | None = None) -> dict[str, Any]:
    """Step time and the veRL-style breakdown of one simulated period (trace in
    `traces`, runs/rollpacker by default)."""
    return run_all([(cfg, name)], traces)[0]


def run_all(items: list[tuple[RunConfig, str]], traces: Path | None = None
            ) -> list[dict[str, Any]]:
    """`run` for several configurations at once (side by side in `reproduce`'s pool)."""
    folder = traces or Path("runs") / PAPER  # made only if the traces are kept (execute)
    paths = [trace_file(folder, name) for _, name in items]
    return run_configs([(cfg, path) for (cfg, _), path in zip(items, paths, strict=True)],
                       label="RollPacker", progress=False, reader=breakdown)


@reads("rollout_start", "decision", "rollout_complete", "train_start", "train_end",
       "request_submit", "request_finish", "run_end")
def breakdown(events: list[dict]) -> dict[str, Any]:
    """Step time and the veRL-style breakdown of a run, from its trace (one pass over
    the events: a period has 30,000 of them). `long_step_s` is the mean wall time of
    the long rounds (rollout start to the next rollout start), Table 3's measure."""
    starts, reward, complete, kinds = [], [], [], []
    train_starts, train_ends = [], []
    round_of: dict[tuple[int, int], int] = {}
    finished = []  # (group, sample, response tokens) of each finished response
    for e in events:
        ev = e["ev"]
        if ev == "request_finish":
            if e["status"] == "finished":
                finished.append((e["group"], e["sample"], e["response_tokens"]))
        elif ev == "request_submit":
            round_of[(e["group"], e["sample"])] = e["round"]
        elif ev == "train_start":
            train_starts.append(e["t"])
        elif ev == "train_end":
            train_ends.append(e["t"])
        elif ev == "decision":
            if e["what"] == "reward_stage":
                reward.append(e["t"])
            elif e["what"].endswith("_round"):
                kinds.append(e["what"])
        elif ev == "rollout_start":
            starts.append(e["t"])
        elif ev == "rollout_complete":
            complete.append(e["t"])
    end = events[-1]["t"]
    train = sum(train_ends) - sum(train_starts)
    stage_starts = reward or complete  # without a reward stage the rollout ends at completion
    rollout = sum(r - s for s, r in zip(starts, stage_starts, strict=True))
    rewards = sum(c - r for r, c in zip(reward, complete, strict=True)) if reward else 0.0
    n = len(starts)
    longest = [0] * n
    for group, sample, tokens in finished:
        r = round_of[(group, sample)]
        longest[r] = max(longest[r], tokens)
    walls = [b - a for a, b in zip(starts, [*starts[1:], end], strict=True)]
    long_walls = [w for w, k in zip(walls, kinds, strict=False) if k == "long_round"]
    return {"step_s": end / n, "rollout_s": rollout / n, "reward_s": rewards / n,
            "train_s": train / n, "long_rounds": kinds.count("long_round") / n,
            "long_step_s": sum(long_walls) / len(long_walls) if long_walls else math.nan,
            "max_len_short": max([m for m, k in zip(longest, kinds, strict=False)
                                  if k != "long_round"] or [0]),
            "max_len_by_round": longest}


Table = tuple[list[dict], list[tuple[RunConfig, str]]]  # row labels, each row's run


def table(rows: list[dict], items: list[tuple[RunConfig, str]],
          results: list[dict[str, Any]] | None = None) -> pd.DataFrame:
    """`rows` (the labels), each joined with its configuration's run."""
    results = run_all(items) if results is None else results
    return pd.DataFrame([{**row, **res} for row, res in zip(rows, results, strict=True)])


def tables(parts: list[Table], traces: Path | None = None) -> list[pd.DataFrame]:
    """Several tables' runs at once (side by side in `reproduce`'s pool), their traces in
    `traces` (runs/rollpacker by default)."""
    results = run_all([item for _, items in parts for item in items], traces)
    out, at = [], 0
    for rows, items in parts:
        out.append(table(rows, items, results[at:at + len(items)]))
        at += len(items)
    return out


def _name(*parts: object) -> str:
    return "-".join(str(p).replace("/", "-").replace(" ", "-").replace(",", "")
                    for p in parts if p != "")


def table2_runs(seed: int) -> Table:
    """Every size, veRL and the four cumulative stages, in every reading that applies."""
    rows, items = [], []
    for size in SIZES:
        for lengths in (LENGTHS if size == "32B/32k" else ("16k lengths",)):
            for stage in range(len(STAGES) + 1):
                both = stage >= 2 and size in BOTH_ANCHORS
                for anchor in (ANCHORS if both else ("persistent anchor",)):
                    reading = reading_of(size, stage, lengths, anchor)
                    label = STAGES[stage - 1] if stage else "veRL"
                    rows.append({"size": size, "system": label, "reading": reading,
                                 "lengths": lengths})
                    items.append((table2_config(size, stage, seed, lengths, anchor),
                                  _name("stage" + str(stage), size, reading)))
    return rows, items


def table2(seed: int) -> pd.DataFrame:
    return table(*table2_runs(seed))


def scaling_runs(seed: int) -> Table:
    """14B/16k on 64 and 128 H800s with 256 and 512 prompts, RollPacker (the first
    anchor reading, as Table 2 at 14B/16k) and veRL (32 GPUs with 128 prompts is
    Table 2's run)."""
    rows, items = [], []
    for gpus in (64, 128):
        rows.append({"system": "verl", "gpus": gpus, "prompts": SCALE_PROMPTS[gpus],
                     "reading": ""})
        items.append((scaled("14B/16k", "verl", gpus, seed), f"scale{gpus}-verl"))
        for anchor in ("persistent anchor",):
            scope = ANCHORS[anchor]
            rows.append({"system": "rollpacker", "gpus": gpus, "prompts": SCALE_PROMPTS[gpus],
                         "reading": anchor})
            items.append((scaled("14B/16k", "rollpacker", gpus, seed, scope),
                          _name(f"scale{gpus}-rollpacker", anchor)))
    return rows, items


def scaling(seed: int) -> pd.DataFrame:
    return table(*scaling_runs(seed))


def eta_config(axis: str, eta: float, seed: int = 0, lengths: str = "16k lengths"
               ) -> RunConfig:
    """Fig. 11 at 32B/32k: tail batching alone, eta on one axis, the other at 1. eta on
    prompts sets the period, so those runs (and eta 1, the base) cover a common multiple
    of the periods compared (`common_period`, 15 rounds); eta on responses defers no
    prompt (period 1), so any number of rounds is whole periods: ROUNDS."""
    cfg = config("32B/32k", "rollpacker", 1, seed, workload=LENGTHS[lengths])
    cfg.rollpacker_speculation = eta if axis == "prompts" else 1.0
    cfg.rollpacker_response_speculation = eta if axis == "responses" else 1.0
    cfg.rounds = common_period() if cfg.rollpacker_response_speculation == 1.0 else ROUNDS
    return cfg


def eta_sweep_runs(seed: int) -> Table:
    """Fig. 11 at 32B/32k: eta on prompts with R fixed, then on responses with P fixed."""
    rows, items = [], []
    for lengths in LENGTHS:
        for axis in ("prompts", "responses"):
            for eta in ETAS:
                rows.append({"axis": axis, "eta": eta, "reading": lengths})
                items.append((eta_config(axis, eta, seed, lengths),
                              _name("eta", axis, eta, lengths)))
    return rows, items


def eta_sweep(seed: int) -> pd.DataFrame:
    return table(*eta_sweep_runs(seed))


def table3_config(label: str, seed: int = 0) -> RunConfig:
    """Table 3 (7B/8k, math): the stream trainer off or started at `label`, over five
    periods, so that five long rounds are averaged."""
    at = STREAM_AT[label]
    cfg = config("7B/8k", "rollpacker", 3 if at is None else 4, seed, workload="rp-math")
    if at is not None:
        cfg.rollpacker_stream_at = at
    cfg.rounds = TABLE3_LONG_ROUNDS * period(1.25)
    return cfg


def table3_runs(seed: int) -> Table:
    rows, items = [], []
    for label in STREAM_AT:
        rows.append({"stream": label})
        items.append((table3_config(label, seed), f"stream-{label.rstrip('%')}"))
    return rows, items


def table3(seed: int) -> pd.DataFrame:
    return table(*table3_runs(seed))
