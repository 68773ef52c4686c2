"""The first-100-steps window of verl's fully-async README, beside its 400-step means.

The README's step, gen and update_actor are means over a run's 400 steps (300 in the
require_batches table), and the runs are not stationary: colocate-32 averages 494 s a step
over its first 100 steps and 790 s over 400, so its "2.66x" is 1.72x over the first 100
(README.md:356-357). Its total time at 100 steps is the one reading of that window the
README gives (validation every 20 steps and the start in it, so an upper bound of the
steps' mean), with the speedups it prints beside it. The simulator draws every step from
one distribution fitted to the 400-step colocated means (`fit`), so these rows say how far
a run's start is from its whole: the colocated ones are not fitted to (`input (not
fitted)`), the fully-async ones and the speedups are predictions.
"""

from __future__ import annotations

import pandas as pd

from harness.studies.claims import Claim
from harness.studies.reproduce.verl_async.claims import (
    FIRST,
    FIRST_100,
    MOE_SPEEDUP_100,
    SCRIPT_READING,
    SPEEDUP,
    SPEEDUP_100,
    TOL,
    reading_of,
)
from harness.studies.reproduce.verl_async.runs import PAPER


def first_100_claims(by: pd.DataFrame, reading: str) -> list[Claim]:
    """Step (every run with a 100-step total) and speedup (where the README prints one) in
    the first 100 steps, against the same simulated runs as the 400-step claims."""
    out: list[Claim] = []
    for label in [*FIRST_100, *SCRIPT_READING]:
        source = SCRIPT_READING.get(label, label)
        if label not in by.index or source not in FIRST_100:
            continue
        want = FIRST_100[source]
        kind = "input (not fitted)" if "colocate" in label else "prediction"
        out.append(Claim(PAPER, "step, first 100 steps (s; total time / 100)", "step",
                         source, want, want, by.loc[label]["step_s"], TOL, kind=kind,
                         reading=reading_of(reading, label, FIRST)))
    for label in [*SPEEDUP, *SCRIPT_READING]:
        source = SCRIPT_READING.get(label, label)
        n, _ = SPEEDUP[source]
        gain = SPEEDUP_100[source]
        ratio = by.loc[f"colocate {n}"]["step_s"] / by.loc[label]["step_s"]
        out.append(Claim(PAPER, "speedup over colocate sync (x, first 100 steps)", "speedup",
                         source, gain, gain, ratio, TOL, reading=reading_of(reading, label, FIRST)))
    if "30B colocate 128" in by.index:
        ratio = by.loc["30B colocate 128"]["step_s"] / by.loc["30B fully async 96:32"]["step_s"]
        out.append(Claim(PAPER, "30B speedup over colocate sync (x, first 100 steps)", "speedup",
                         "Qwen3-30B-A3B 96:32", MOE_SPEEDUP_100, MOE_SPEEDUP_100, ratio, TOL,
                         reading=reading_of(reading, "", FIRST)))
    return out
