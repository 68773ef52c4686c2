"""RollPacker's setup and its simulated runs: the periods behind Tables 2 and 3 and Fig. 11.

Setup as in the paper: Qwen2.5-7B/14B/32B with response caps 8k/16k/32k on
16/32/64 H800s (rollout TP 1/2/2), colocated, P0=128 prompts x R0=8 responses,
one optimizer step per rollout, the mixed math/code/judge workload (`rp-mix`).
The baseline is veRL (generate, then a reward stage, then train). A period of
five rounds (four short, one long) is simulated, and a system's step time is the
period's wall time over five (`breakdown`, made where the run was). Each table
is a list of labelled runs, so that all of them go to `reproduce`'s pool at once.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.config import RunConfig
from harness.run.execute import reads
from harness.sim.calibration import load as calibration_file
from harness.studies.reproduce.grid import run_configs

PAPER = "rollpacker"
ROUNDS = 5
SIZES = {  # name: model, cap, GPUs, TP
    "7B/8k": ("qwen2.5-7b", 8192, 16, 1),
    "14B/16k": ("qwen2.5-14b", 16384, 32, 2),
    "32B/32k": ("qwen2.5-32b", 32768, 64, 2),
}
STAGES = ("tail batching", "+ reward scheduler", "+ parallelism planner", "+ stream trainer")
# Table 3's rows: where the stream trainer starts (None: it is off; 0.0: adaptive)
STREAM_AT = {"none": None, "20%": 0.2, "30%": 0.3, "40%": 0.4, "adaptive": 0.0}


def config(size: str, system: str, stage: int = 4, seed: int = 0, workload: str = "rp-mix",
           calibration: str = PAPER) -> RunConfig:
    """`stage` counts the RollPacker components switched on, in Table 2's order."""
    model, cap, gpus, tp = SIZES[size]
    cfg = RunConfig(system=system, workload=workload, seed=seed, rounds=ROUNDS, groups=128,
                    update_groups=128, group_size=8, max_response_tokens=cap,
                    rollpacker_tail_batching=stage >= 1, rollpacker_reward_scheduler=stage >= 2,
                    rollpacker_planner=stage >= 3, rollpacker_stream_trainer=stage >= 4,
                    rollpacker_speculation=1.25, rollpacker_response_speculation=1.25,
                    rollpacker_stream_at=0.0)  # explicit: defaults may change elsewhere
    s = cfg.sim
    s.calibration, s.model, s.rollout_gpu, s.trainer_gpu = calibration, model, "h800-sxm", \
        "h800-sxm"
    s.rollout_tp, s.rollout_engines, s.placement = tp, gpus // tp, "colocated"
    s.engine_backend = "vllm"  # veRL, RollPacker's base, serves with vLLM
    s.verifier_workers = int(calibration_file(calibration).get("fixed", {}).get(
        "verifier_workers", 64))
    return cfg


def run(cfg: RunConfig, name: str, traces: Path | None = None) -> dict[str, float]:
    """Step time and the veRL-style breakdown of one simulated period (trace in
    `traces`, runs/rollpacker by default)."""
    return run_all([(cfg, name)], traces)[0]


def run_all(items: list[tuple[RunConfig, str]], traces: Path | None = None
            ) -> list[dict[str, float]]:
    """`run` for several configurations at once (side by side in `reproduce`'s pool)."""
    folder = traces or Path("runs") / PAPER
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{name}.jsonl" for _, name in items]
    return run_configs([(cfg, path) for (cfg, _), path in zip(items, paths, strict=True)],
                       label="RollPacker", progress=False, reader=breakdown)


@reads("rollout_start", "decision", "rollout_complete", "train_start", "train_end",
       "request_submit", "request_finish", "run_end")
def breakdown(events: list[dict]) -> dict[str, float]:
    """Step time and the veRL-style breakdown of one period, from its trace (one pass
    over the events: a period has 30,000 of them)."""
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
    return {"step_s": end / n, "rollout_s": rollout / n, "reward_s": rewards / n,
            "train_s": train / n, "long_rounds": kinds.count("long_round") / n,
            "max_len_short": max([m for m, k in zip(longest, kinds, strict=False)
                                  if k != "long_round"] or [0]),
            "max_len_by_round": longest}


Table = tuple[list[dict], list[tuple[RunConfig, str]]]  # row labels, each row's run


def table(rows: list[dict], items: list[tuple[RunConfig, str]],
          results: list[dict[str, float]] | None = None) -> pd.DataFrame:
    """`rows` (the labels), each joined with its configuration's run."""
    results = run_all(items) if results is None else results
    return pd.DataFrame([{**row, **res} for row, res in zip(rows, results, strict=True)])


def tables(parts: list[Table]) -> list[pd.DataFrame]:
    """Several tables' runs at once (side by side in `reproduce`'s pool)."""
    results = run_all([item for _, items in parts for item in items])
    out, at = [], 0
    for rows, items in parts:
        out.append(table(rows, items, results[at:at + len(items)]))
        at += len(items)
    return out


def table2_runs(seed: int) -> Table:
    rows, items = [], []
    for size in SIZES:
        rows.append({"size": size, "system": "veRL"})
        items.append((config(size, "verl", seed=seed), f"verl-{size.replace('/', '-')}"))
        for stage, label in enumerate(STAGES, start=1):
            rows.append({"size": size, "system": label})
            items.append((config(size, "rollpacker", stage, seed),
                          f"stage{stage}-{size.replace('/', '-')}"))
    return rows, items


def table2(seed: int) -> pd.DataFrame:
    return table(*table2_runs(seed))


def scaling_runs(seed: int) -> Table:
    """14B/16k on twice the GPUs (64 H800), RollPacker and veRL."""
    rows, items = [], []
    for system in ("verl", "rollpacker"):
        cfg = config("14B/16k", system, 4, seed)
        cfg.sim.rollout_engines *= 2
        rows.append({"system": system, "gpus": 64})
        items.append((cfg, f"scale64-{system}"))
    return rows, items


def scaling(seed: int) -> pd.DataFrame:
    return table(*scaling_runs(seed))


def eta_sweep_runs(seed: int) -> Table:
    """Fig. 11 at 32B/32k: eta on prompts with R fixed, then on responses with P fixed."""
    rows, items = [], []
    for axis in ("prompts", "responses"):
        for eta in (1.0, 1.25, 1.5):
            cfg = config("32B/32k", "rollpacker", 1, seed)
            cfg.rollpacker_speculation = eta if axis == "prompts" else 1.0
            cfg.rollpacker_response_speculation = eta if axis == "responses" else 1.0
            rows.append({"axis": axis, "eta": eta})
            items.append((cfg, f"eta-{axis}-{eta}"))
    return rows, items


def eta_sweep(seed: int) -> pd.DataFrame:
    return table(*eta_sweep_runs(seed))


def table3_runs(seed: int) -> Table:
    rows, items = [], []
    for label, at in STREAM_AT.items():
        cfg = config("7B/8k", "rollpacker", 3 if at is None else 4, seed, workload="rp-math")
        if at is not None:
            cfg.rollpacker_stream_at = at
        rows.append({"stream": label})
        items.append((cfg, f"stream-{label.rstrip('%')}"))
    return rows, items


def table3(seed: int) -> pd.DataFrame:
    return table(*table3_runs(seed))
