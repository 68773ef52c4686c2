"""RollPacker's numbers and the claims made of the simulated tables.

Table 2's cumulative speedups over veRL, Fig. 11's best eta, Table 3's stream
trainer, the text's statements on short rounds and scale, and Table 1's veRL
stage shares (inputs: the calibration is fitted to them). The paper's numbers
are never read while simulating. A claim run in several readings (`runs.LENGTHS`,
`runs.ANCHORS`) has one row per reading.
"""

from __future__ import annotations

import pandas as pd

from harness.studies.claims import Claim
from harness.studies.reproduce.rollpacker.runs import (
    LENGTHS,
    P0,
    PAPER,
    SCALE_PROMPTS,
    STAGES,
)

TABLE2 = {  # cumulative speedup over veRL per size
    "7B/8k": (1.30, 2.01, 2.01, 2.03),
    "14B/16k": (1.48, 1.99, 2.02, 2.22),
    "32B/32k": (2.21, 2.48, 2.52, 2.56),
}
TABLE3 = {"none": 124.2, "20%": 122.7, "30%": 118.2, "40%": 119.8, "adaptive": 115.2}
ROLLOUT_SPEEDUP_MAX = 3.9  # Fig. 11: tail batching speeds the average rollout up to 3.9x
MAX_LEN_CUT = 8.9  # Sec. 3: short rounds cut the longest response by up to 8.9x (14B/16k)
LONG_ROUND_EVERY = 5  # a long round about every fifth step
SCALE_2X = 1.5  # Sec. 6.7: twice the GPUs give about 1.5x the throughput
AT_SCALE = 2.2  # 2.2x the throughput of veRL at scale
# Table 1 (veRL, Qwen2.5-14B/16k, 32 H800): "Math 72% 5% 23%", "Code 66% 13% 21%",
# "LLM-as-a-Judge 71% 7% 22%" (rollout, reward, training); Sec. 2.2: "The reward stage
# contributes a smaller fraction (5%-13%), while the training stage accounts for
# 21%-23%". Inputs: `calibrate rollpacker` fits the reward workers and the trainer's
# MFU to the means (8.3%, 22%) on the mixed workload. Per task (math, code, judge):
VERL_REWARD_PCT = (5, 13, 7)
VERL_TRAIN_PCT = (23, 21, 22)
VERL_REWARD_SHARE = (min(VERL_REWARD_PCT) / 100, max(VERL_REWARD_PCT) / 100)
VERL_TRAIN_SHARE = (min(VERL_TRAIN_PCT) / 100, max(VERL_TRAIN_PCT) / 100)


def mean_share(pct: tuple[int, ...]) -> float:
    """The mean of Table 1's per-task shares: the runs mix the three tasks equally."""
    return sum(pct) / len(pct) / 100


def claims(t2: pd.DataFrame, eta: pd.DataFrame, t3: pd.DataFrame,
           scale: pd.DataFrame) -> list[Claim]:
    out: list[Claim] = []
    by = t2.set_index(["size", "system", "reading"])
    step = by["step_s"]
    tb = by.loc[("14B/16k", "tail batching", "")]
    verl = by.loc[("14B/16k", "veRL", "")]
    cut = max(v / t for v, t in zip(verl["max_len_by_round"][:4], tb["max_len_by_round"][:4],
                                     strict=True) if t)
    out.append(Claim(PAPER, "short rounds cut the longest response (up to, x)", "max_len",
                     "14B/16k", MAX_LEN_CUT, MAX_LEN_CUT, cut, 0.25))
    # Consistency, not a prediction: at eta 1.25 a short round defers ceil(1.25 x 128)
    # - 128 = 32 prompts, so the long-prompt queue holds P0 after four short rounds
    # whatever the lengths; one long round in five is the schedule's period
    # (runs.schedule), true by construction.
    out.append(Claim(PAPER, "long rounds per step (about every fifth)", "rounds", "14B/16k",
                     1 / LONG_ROUND_EVERY, 1 / LONG_ROUND_EVERY, tb["long_rounds"], 0.0,
                     kind="consistency"))
    total = verl["rollout_s"] + verl["reward_s"] + verl["train_s"]
    lo, hi = VERL_REWARD_SHARE
    out.append(Claim(PAPER, "veRL reward share of a step (Table 1)", "share", "14B/16k",
                     lo, hi, verl["reward_s"] / total, 0.10, kind="input"))
    lo, hi = VERL_TRAIN_SHARE
    out.append(Claim(PAPER, "veRL training share of a step (Table 1)", "share", "14B/16k",
                     lo, hi, verl["train_s"] / total, 0.10, kind="input"))
    out += _scaling(step, scale)
    for (size, system, reading), row in by.iterrows():
        if system == "veRL":
            continue
        lengths = next((r for r in LENGTHS if reading.startswith(r)), "16k lengths")
        base = step[(size, "veRL", lengths if size == "32B/32k" else "")]
        value = TABLE2[size][STAGES.index(system)]
        out.append(Claim(PAPER, f"Table 2 speedup over veRL: {system}", "step_s", size,
                         value, value, base / row["step_s"], 0.10, reading=reading))
    for lengths in LENGTHS:
        rows = eta[eta["reading"] == lengths].set_index(["axis", "eta"])["rollout_s"]
        base = rows[("prompts", 1.0)]
        best = max(base / rows[(axis, e)] for axis in ("prompts", "responses")
                   for e in (1.25, 1.5))
        out.append(Claim(PAPER, "tail batching rollout speedup, best eta (up to)",
                         "rollout_s", "32B/32k", 1.0, ROLLOUT_SPEEDUP_MAX, best, 0.10,
                         reading=lengths))
        worse = float(rows[("prompts", 1.5)] > rows[("prompts", 1.25)])
        out.append(Claim(PAPER, "eta 1.5 on prompts slower than 1.25 (1 = holds)",
                         "rollout_s", "32B/32k", 1.0, 1.0, worse, 0.0, reading=lengths))
    # Sec. 6.3: "we fix η=1.25 for both. Under this setting, tail batching improves the
    # average rollout speed by up to 3.9×": eta 1.25 on prompts and responses, Table 2's
    # tail-batching runs against veRL's rollout, the most of the three sizes ("up to").
    for lengths in LENGTHS:
        tb = {size: by.loc[(size, "veRL", _lengths(size, lengths)), "rollout_s"]
              / by.loc[(size, "tail batching", _lengths(size, lengths)), "rollout_s"]
              for size in TABLE2}
        out.append(Claim(PAPER, "tail batching rollout speedup at eta 1.25 on both (up to)",
                         "rollout_s", "most of 7B/8k, 14B/16k, 32B/32k", 1.0,
                         ROLLOUT_SPEEDUP_MAX, max(tb.values()), 0.10, reading=lengths))
    # Sec. 6.6: "we report the average speedup over five long rounds": the mean step
    # of the runs' five long rounds (runs.table3_config), not of whole periods.
    s3 = t3.set_index("stream")["long_step_s"]
    for label, value in TABLE3.items():
        if label != "none":
            ratio = value / TABLE3["none"]
            out.append(Claim(PAPER, f"Table 3 stream trainer at {label}: step / none",
                             "long_step_s", "7B/8k math", round(ratio, 4), round(ratio, 4),
                             s3[label] / s3["none"], 0.03))
    return out


def _lengths(size: str, lengths: str) -> str:
    """The reading of a tail-batching or veRL row of Table 2: the lengths at 32B only."""
    return lengths if size == "32B/32k" else ""


def scale_config(gpus: int) -> str:
    """The config column of a scale point (14B/16k, batch scaled with the GPUs)."""
    return f"14B/16k {gpus} H800, {SCALE_PROMPTS[gpus]} prompts"


def gain_config(lo: int, hi: int) -> str:
    """The config column of a doubling of the GPUs, batch with them."""
    return f"14B/16k {lo}->{hi} H800, {SCALE_PROMPTS[lo]}->{SCALE_PROMPTS[hi]} prompts"


def _scaling(step: pd.Series, scale: pd.DataFrame) -> list[Claim]:
    """Sec. 6.7 at 14B/16k, batch and reward workers scaled with the GPUs (runs.scaled):
    throughput (samples per second) from 32 to 64 and 64 to 128 GPUs, and over veRL at
    64 and 128 (at 32 it is Table 2's 14B/16k stream-trainer row, not repeated here)."""
    out: list[Claim] = []
    sc = scale.set_index(["system", "gpus", "reading"])["step_s"]
    prompts = {**SCALE_PROMPTS, 32: P0}
    for anchor in ("persistent anchor",):  # as runs.scaling_runs
        steps = {32: step[("14B/16k", "+ stream trainer", anchor)],
                 64: sc[("rollpacker", 64, anchor)], 128: sc[("rollpacker", 128, anchor)]}
        for lo, hi in ((32, 64), (64, 128)):
            gain = (prompts[hi] / steps[hi]) / (prompts[lo] / steps[lo])
            out.append(Claim(PAPER, "2x GPUs: RollPacker throughput gain (x)", "samples_s",
                             gain_config(lo, hi), SCALE_2X, SCALE_2X, gain, 0.10, reading=anchor))
        for gpus in (64, 128):
            out.append(Claim(PAPER, "throughput over veRL at scale (x)", "samples_s",
                             scale_config(gpus), AT_SCALE, AT_SCALE,
                             sc[("verl", gpus, "")] / steps[gpus], 0.10, reading=anchor))
    return out
