"""PipelineRL vs conventional RL on the simulator: everything about the paper.

The Appendix A model (computed by `harness.studies.analytic.pipelinerl`, with U(h)
measured: aiconfigurator-core's H100 GEMM table, or in the claims' roofline twin
our roofline) and a simulated Fig. 5c / Fig. 6: Qwen2.5-7B on 128 H100s,
PipelineRL against conventional RL with G = 8, 16, 32 steps per rollout.

The folder: `runs` (the setup, the simulated runs and U(h)), `claims` (the
paper's numbers and the claims made of the model and the runs), `figures` (the
simulated comparison) and `would_need` (its families of the would-need search).
This module is what `harness.studies.reproduce` reads of a paper: its name, the
files it writes, where its misses are read, one engine of its setup, and
`reproduce`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.config import RunConfig
from harness.core.files import write_atomic
from harness.studies.analytic import pipelinerl as analytic
from harness.studies.claims import Claim
from harness.studies.reproduce.pipelinerl import claims, runs
from harness.studies.reproduce.pipelinerl.figures import figure
from harness.studies.reproduce.pool import is_twin

PAPER = runs.PAPER
RESULTS = ("pipelinerl.csv", "pipelinerl_appendix_a.csv")
FIGURES = ("pipelinerl_fig8_utilisation.png", "pipelinerl_fig9_analytic.png",
           "pipelinerl_throughput_ess.png")
READING = ("the PipelineRL reading", "../docs/reproductions.md#pipelinerl")


def engine() -> RunConfig:
    """One engine of the setup (all of the paper's share its GPU and framework)."""
    return runs.base("pipelinerl", 0)


def reproduce(out: Path, figures: Path, rounds: int = 4, seed: int = 0) -> list[Claim]:
    """Appendix A and the simulated comparison; `rounds` is fixed by the setup."""
    util = runs.utilisation()
    res = analytic.search(util=util)
    case = analytic.case_study(res=res, util=util)
    if not is_twin():  # the claims' twin draws no figure
        figures.mkdir(parents=True, exist_ok=True)
        analytic.figure8(figures / "pipelinerl_fig8_utilisation.png")
        analytic.figure9(figures / "pipelinerl_fig9_analytic.png", res)
    sim = runs.simulate(seed, out / "runs" / PAPER)
    write_atomic(out / "pipelinerl.csv", sim.to_csv(index=False, float_format="%.6g"))
    write_atomic(out / "pipelinerl_appendix_a.csv",
                 pd.DataFrame([case]).to_csv(index=False, float_format="%.6g"))
    if not is_twin():
        figure(sim, figures / "pipelinerl_throughput_ess.png")
    return claims.claims(sim, case)
