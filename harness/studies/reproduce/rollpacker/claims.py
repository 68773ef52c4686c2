"""RollPacker's numbers and the claims made of the simulated tables.

Table 2's cumulative speedups over veRL, Fig. 11's best eta, Table 3's stream
trainer and the text's statements on short rounds and scale. The paper's numbers
are never read while simulating.
"""

from __future__ import annotations

import pandas as pd

from harness.studies.claims import Claim
from harness.studies.reproduce.rollpacker.runs import PAPER, STAGES

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
