"""RollPacker: Table 2's cumulative speedups, Fig. 11's eta sensitivity, Table 3's stream trainer.

Setup as in the paper: Qwen2.5-7B/14B/32B with response caps 8k/16k/32k on
16/32/64 H800s (rollout TP 1/2/2), colocated, P0=128 prompts x R0=8 responses,
one optimizer step per rollout, the mixed math/code/judge workload (`rp-mix`).
The baseline is veRL (generate, then a reward
stage, then train). A period of five rounds (four short, one long) is
simulated, and a system's step time is the period's wall time over five.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.config import RunConfig
from harness.core.files import write_atomic
from harness.core.plots import save_figure
from harness.sim.calibration import load as calibration_file
from harness.studies.claims import Claim
from harness.studies.reproduce.grid import run_configs

PAPER = "rollpacker"
ROUNDS = 5
SIZES = {  # name: model, cap, GPUs, TP
    "7B/8k": ("qwen2.5-7b", 8192, 16, 1),
    "14B/16k": ("qwen2.5-14b", 16384, 32, 2),
    "32B/32k": ("qwen2.5-32b", 32768, 64, 2),
}
STAGES = ("tail batching", "+ reward scheduler", "+ parallelism planner", "+ stream trainer")
TABLE2 = {  # cumulative speedup over veRL per size
    "7B/8k": (1.30, 2.01, 2.01, 2.03),
    "14B/16k": (1.48, 1.99, 2.02, 2.22),
    "32B/32k": (2.21, 2.48, 2.52, 2.56),
}
TABLE3 = {"none": 124.2, "20%": 122.7, "30%": 118.2, "40%": 119.8, "adaptive": 115.2}
STREAM_AT = {"none": None, "20%": 0.2, "30%": 0.3, "40%": 0.4, "adaptive": 0.0}
ROLLOUT_SPEEDUP_MAX = 3.9  # Fig. 11: tail batching speeds the average rollout up to 3.9x
MAX_LEN_CUT = 8.9  # Sec. 3: short rounds cut the longest response by up to 8.9x (14B/16k)
LONG_ROUND_EVERY = 5  # a long round about every fifth step
SCALE_2X = 1.5  # Sec. 6.7: twice the GPUs give about 1.5x the throughput
AT_SCALE = 2.2  # 2.2x the throughput of veRL at scale


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


def breakdown(events: list[dict]) -> dict[str, float]:
    """Step time and the veRL-style breakdown of one period, from its trace."""
    end = events[-1]["t"]
    starts = [e["t"] for e in events if e["ev"] == "rollout_start"]
    reward = [e["t"] for e in events if e["ev"] == "decision" and e["what"] == "reward_stage"]
    complete = [e["t"] for e in events if e["ev"] == "rollout_complete"]
    train = sum(e["t"] for e in events if e["ev"] == "train_end") - sum(
        e["t"] for e in events if e["ev"] == "train_start")
    stage_starts = reward or complete  # without a reward stage the rollout ends at completion
    rollout = sum(r - s for s, r in zip(starts, stage_starts, strict=True))
    rewards = sum(c - r for r, c in zip(reward, complete, strict=True)) if reward else 0.0
    n = len(starts)
    longest = [0] * n
    round_of = {(e["group"], e["sample"]): e["round"] for e in events
                if e["ev"] == "request_submit"}
    for e in events:
        if e["ev"] == "request_finish" and e["status"] == "finished":
            r = round_of[(e["group"], e["sample"])]
            longest[r] = max(longest[r], e["response_tokens"])
    kinds = [e["what"] for e in events if e["ev"] == "decision" and e["what"].endswith("_round")]
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


def claims(t2: pd.DataFrame, eta: pd.DataFrame, t3: pd.DataFrame,
           scale: pd.DataFrame) -> list[Claim]:
    out: list[Claim] = []
    step = t2.set_index(["size", "system"])["step_s"]
    tb = t2.set_index(["size", "system"]).loc[("14B/16k", "tail batching")]
    verl = t2.set_index(["size", "system"]).loc[("14B/16k", "veRL")]
    cut = max(v / t for v, t in zip(verl["max_len_by_round"][:4], tb["max_len_by_round"][:4],
                                     strict=True) if t)
    out.append(Claim(PAPER, "short rounds cut the longest response (up to, x)", "max_len",
                     "14B/16k", MAX_LEN_CUT, MAX_LEN_CUT, cut, 0.25))
    out.append(Claim(PAPER, "long rounds per step (about every fifth)", "rounds", "14B/16k",
                     1 / LONG_ROUND_EVERY, 1 / LONG_ROUND_EVERY, tb["long_rounds"], 0.0))
    sc = scale.set_index("system")["step_s"]
    out.append(Claim(PAPER, "2x GPUs: RollPacker throughput gain (x)", "step_s",
                     "14B/16k 32->64 H800", SCALE_2X, SCALE_2X,
                     step[("14B/16k", "+ stream trainer")] / sc["rollpacker"], 0.10))
    out.append(Claim(PAPER, "throughput over veRL at scale (x)", "step_s", "14B/16k 64 H800",
                     AT_SCALE, AT_SCALE, sc["verl"] / sc["rollpacker"], 0.10))
    for size, paper in TABLE2.items():
        base = step[(size, "veRL")]
        for label, value in zip(STAGES, paper, strict=True):
            out.append(Claim(PAPER, f"Table 2 speedup over veRL: {label}", "step_s", size,
                             value, value, base / step[(size, label)], 0.10))
    by = eta.set_index(["axis", "eta"])["rollout_s"]
    base = by[("prompts", 1.0)]
    best = max(base / by[(axis, e)] for axis in ("prompts", "responses") for e in (1.25, 1.5))
    out.append(Claim(PAPER, "tail batching rollout speedup, best eta (up to)", "rollout_s",
                     "32B/32k", 1.0, ROLLOUT_SPEEDUP_MAX, best, 0.10))
    worse = float(by[("prompts", 1.5)] > by[("prompts", 1.25)])
    out.append(Claim(PAPER, "eta 1.5 on prompts slower than 1.25 (1 = holds)", "rollout_s",
                     "32B/32k", 1.0, 1.0, worse, 0.0))
    s3 = t3.set_index("stream")["step_s"]
    for label, value in TABLE3.items():
        if label != "none":
            ratio = value / TABLE3["none"]
            out.append(Claim(PAPER, f"Table 3 stream trainer at {label}: step / none",
                             "step_s", "7B/8k math", round(ratio, 4), round(ratio, 4),
                             s3[label] / s3["none"], 0.03))
    return out


def figure(t2: pd.DataFrame, path: Path) -> None:
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(8, 3.4))
    x = np.arange(len(SIZES))
    step = t2.set_index(["size", "system"])["step_s"]
    for i, label in enumerate(STAGES):
        sim = [step[(s, "veRL")] / step[(s, label)] for s in SIZES]
        ax.bar(x + (i - 1.5) * 0.2, sim, 0.2, label=label)
        ax.scatter(x + (i - 1.5) * 0.2, [TABLE2[s][i] for s in SIZES], marker="_", s=200,
                   color="k", zorder=3, label="paper" if i == 0 else None)
    ax.set_xticks(x, list(SIZES))
    ax.set_xlabel("model / response cap")
    ax.set_ylabel("speedup over veRL (x, step time)")
    ax.axhline(1, color="#555555", lw=0.8)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False,
              title="components (cumulative)", title_fontsize=7)
    ax.set_title("Simulated RollPacker Table 2: cumulative speedup over veRL "
                 "(paper: black ticks)", fontsize=10)
    save_figure(fig, path)


def reproduce(out: Path, figures: Path, rounds: int = 4, seed: int = 0) -> list[Claim]:
    """Table 2, Fig. 11 and Table 3; `rounds` is fixed by the setup (a period of 5)."""
    t2, eta, t3, scale = tables([table2_runs(seed), eta_sweep_runs(seed), table3_runs(seed),
                                 scaling_runs(seed)])
    for name, df in (("table2", t2), ("eta", eta), ("table3", t3), ("scaling", scale)):
        write_atomic(out / f"rollpacker_{name}.csv",
                     df.drop(columns="max_len_by_round").to_csv(index=False,
                                                                float_format="%.6g"))
    figure(t2, figures / "rollpacker_table2.png")
    eta_figure(eta, figures / "rollpacker_fig11_eta.png")
    return claims(t2, eta, t3, scale)


def eta_figure(eta: pd.DataFrame, path: Path) -> None:
    """Fig. 11: average rollout time per round against eta, normalised to no tail batching."""
    import matplotlib.pyplot as plt

    base = eta[(eta["axis"] == "prompts") & (eta["eta"] == 1.0)]["rollout_s"].iloc[0]
    fig, ax = plt.subplots(figsize=(5, 3))
    for axis, marker in (("prompts", "o"), ("responses", "s")):
        sub = eta[eta["axis"] == axis]
        ax.plot(sub["eta"], sub["rollout_s"] / base, marker=marker, label=f"η on {axis}")
    ax.set_xlabel("speculation factor η (requests started / requests kept)")
    ax.set_ylabel("rollout time per round\n(x, against η = 1)")
    ax.set_title("Simulated RollPacker Fig. 11: tail batching's η (32B/32k)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(fig, path)
