"""RollPacker on the simulator: everything about the paper.

Table 2's cumulative speedups, Fig. 11's eta sensitivity, Table 3's stream
trainer and the scaling statements, for Qwen2.5-7B/14B/32B on 16/32/64 H800s
against veRL.

The folder: `runs` (the setup and the simulated periods behind each table),
`claims` (the paper's numbers and the claims made of the tables), `figures`
(Table 2 and Fig. 11) and `would_need` (its families of the would-need search).
This module is what `harness.studies.reproduce` reads of a paper: its name, the
files it writes, where its misses are read, one engine of its setup, and
`reproduce`.
"""

from __future__ import annotations

from pathlib import Path

from harness.core.config import RunConfig
from harness.core.files import write_atomic
from harness.studies.claims import Claim
from harness.studies.reproduce.pool import is_twin
from harness.studies.reproduce.rollpacker import claims, runs
from harness.studies.reproduce.rollpacker.figures import eta_figure, figure

PAPER = runs.PAPER
RESULTS = ("rollpacker_table2.csv", "rollpacker_eta.csv", "rollpacker_table3.csv",
           "rollpacker_scaling.csv")
FIGURES = ("rollpacker_table2.png", "rollpacker_fig11_eta.png")
READING = ("the RollPacker reading", "../docs/reproductions.md#rollpacker")


def engine() -> RunConfig:
    """One engine of the setup (all of the paper's share its GPU and framework)."""
    return runs.config("7B/8k", "verl")


def reproduce(out: Path, figures: Path, rounds: int = 4, seed: int = 0) -> list[Claim]:
    """Table 2, Fig. 11 and Table 3; `rounds` is fixed by the setup (whole periods of
    tail batching's schedule, `runs.period`)."""
    t2, eta, t3, scale = runs.tables([runs.table2_runs(seed), runs.eta_sweep_runs(seed),
                                      runs.table3_runs(seed), runs.scaling_runs(seed)],
                                     out / "runs" / PAPER)
    for name, df in (("table2", t2), ("eta", eta), ("table3", t3), ("scaling", scale)):
        write_atomic(out / f"rollpacker_{name}.csv",
                     df.drop(columns="max_len_by_round").to_csv(index=False,
                                                                float_format="%.6g"))
    if not is_twin():  # the claims' twin draws no figure
        figure(t2, figures / "rollpacker_table2.png")
        eta_figure(eta, figures / "rollpacker_fig11_eta.png")
    return claims.claims(t2, eta, t3, scale)
