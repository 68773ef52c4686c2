"""How APRIL's DAPO rows depend on the share of zero-variance groups: a sweep, not a fit.

DAPO's dynamic sampling drops a group whose 8 rewards are all equal, and slime then
submits a whole new over-sampling batch once fewer than R groups are complete or in
flight (systems.april). How often that happens depends on the share of such groups,
which the paper never reports. The workload profiles assume a pass rate (0.55 for
DAPO-Math-17k, falling with a prompt's difficulty, slope 0.8), which puts about 9% of
prompts' groups at zero variance at the 16k cap; their "scheduling metrics do not
depend on it" holds for GRPO and not for DAPO. This sweep moves the pass rate (so the
zero-variance share) on one Table 1 cell, baseline and APRIL, and reports the share
(of the prompts drawn, and of the groups the rounds completed), the throughputs and
the gain. Nothing is fitted to the paper's numbers: the table shows how far the DAPO
rows move, for the docs.

    .venv/bin/python -m harness.studies.reproduce.april.sensitivity OUT.csv
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

import workloads.profile as profiles
from harness.core.trace_io import trace_file
from harness.run.execute import execute
from harness.studies.reproduce.april import claims, runs

PASS_RATES = (0.55, 0.7, 0.8, 0.9, 0.95)  # 0.55: the profile's own
CELL = ("dapo", "qwen3-4b", "dapo-math-17k")
DRAWS = 4000  # prompts drawn to measure a profile's zero-variance share


@contextmanager
def pass_rate(dataset: str, rate: float) -> Iterator[profiles.Profile]:
    """The profile of `dataset` with another pass rate, for the runs made inside."""
    load = profiles.load_profile
    changed = dataclasses.replace(load(dataset), pass_rate=rate)  # type: ignore[arg-type]
    profiles.load_profile = lambda name: changed if name == dataset else load(name)
    try:
        yield changed
    finally:
        profiles.load_profile = load


def zero_variance_share(profile: profiles.Profile, k: int, cap: int, seed: int = 0) -> float:
    """Share of prompts whose k rewards are all equal, a response at the cap scoring 0
    (as the simulated verifier scores a truncated one)."""
    work = profiles.SimWorkload(profile, seed, k)
    same = 0
    for i in range(DRAWS):
        hidden = work.draw(i).hidden
        rewards = {0.0 if n >= cap else r for n, r in zip(hidden.lengths, hidden.rewards,
                                                          strict=True)}
        same += len(rewards) == 1
    return same / DRAWS


def sweep(rates: tuple[float, ...] = PASS_RATES, seed: int = 0) -> pd.DataFrame:
    """One row per pass rate (and one with the filter off: the GRPO runs of the cell)."""
    algo, model, dataset = CELL
    folder = Path(tempfile.mkdtemp(prefix="april-sensitivity-"))
    base, april = claims.TABLE1[(algo, model)][runs.DATASETS.index(dataset)]
    out = []
    for rate in (None, *rates):
        with pass_rate(dataset, rate or profiles.load_profile(dataset).pass_rate) as prof:
            frames = []
            for method in ("baseline", "april"):
                cfg = runs.config("grpo" if rate is None else algo, model, dataset,
                                  method == "april", seed, runs.ROUNDS)
                rows = execute(cfg, trace_file(folder, method), runs.round_rows)
                frames.append(pd.DataFrame(rows).assign(algo=algo, model=model,
                                                        method=method))
            share = zero_variance_share(prof, 8, 16384, seed)
        m = runs.steady(pd.concat(frames, ignore_index=True))
        b, a = (m.loc[(algo, model, dataset, k)] for k in ("baseline", "april"))
        out.append({"filter": "off (GRPO)" if rate is None else "on",
                    "pass_rate": prof.pass_rate, "prompts_zero_variance_pct": 100 * share,
                    "baseline_dropped_pct": 100 * b["zero_variance"],
                    "april_dropped_pct": 100 * a["zero_variance"],
                    "baseline_batches": b["batches"], "april_batches": a["batches"],
                    "baseline_tok_s": b["throughput"], "april_tok_s": a["throughput"],
                    "gain_pct": claims.gains(m, algo, model, dataset),
                    "paper_baseline_tok_s": base, "paper_april_tok_s": april,
                    "paper_gain_pct": round(100 * (april / base - 1), 1)})
    return pd.DataFrame(out)


if __name__ == "__main__":
    table = sweep()
    table.to_csv(sys.argv[1] if len(sys.argv) > 1 else sys.stdout, index=False,
                 float_format="%.4g")
