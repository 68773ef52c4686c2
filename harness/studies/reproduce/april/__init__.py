"""APRIL (active partial rollouts) on the simulator: everything about the paper.

Table 1's throughput gains, the share of carried-over tokens and the policy
versions behind a sample, on 8 AMD MI300X with Qwen3-4B and Qwen3-8B, GRPO and
DAPO, baseline against APRIL on three datasets.

The folder: `runs` (the setup as the authors' scripts run it, the 24 simulated
configurations and their steady state), `claims` (the paper's numbers, the gains in
tokens generated in the round, the carried-over share under its three readings, and
the claims made of them), `figures` (Table 1 as bars), `would_need` (its family of
the would-need search) and `sensitivity` (the DAPO rows against the share of
zero-variance groups, a sweep for the docs, not part of `reproduce`). This module is what
`harness.studies.reproduce` reads of a paper: its name, the files it writes,
where its misses are read, one engine of its setup, and `reproduce`.
"""

from __future__ import annotations

from pathlib import Path

from harness.core.config import RunConfig
from harness.core.files import write_atomic
from harness.studies.claims import Claim
from harness.studies.reproduce.april import claims, runs
from harness.studies.reproduce.april.figures import figure
from harness.studies.reproduce.pool import is_twin

PAPER = runs.PAPER
RESULTS = ("april.csv", "april_gains.csv")
FIGURES = ("april_table1.png",)
READING = ("the APRIL reading", "../docs/reproductions.md#april")


def engine() -> RunConfig:
    """One engine of the setup (all of the paper's share its GPU and framework)."""
    return runs.config("grpo", runs.MODELS[0], runs.DATASETS[0], True, 0, 1)


def reproduce(out: Path, figures: Path, rounds: int = 4, seed: int = 0) -> list[Claim]:
    """Run the 24 configurations; `rounds` is fixed by the setup (8, two warm-up)."""
    df = runs.simulate(seed=seed, traces=out / "runs" / PAPER)
    write_atomic(out / "april.csv", df.to_csv(index=False, float_format="%.6g"))
    write_atomic(out / "april_gains.csv", claims.gains_table(df).to_csv(index=False,
                                                                        float_format="%.6g"))
    if not is_twin():  # the claims' twin draws no figure
        figure(df, figures / "april_table1.png")
    return claims.claims(df)
