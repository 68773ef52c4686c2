"""RolloutPipe (Slime vs CGP vs CGP+FGD) on the simulator: everything about the paper.

Grid: 4 workloads x R in {32, 64, 96} x 3 systems x 4 rounds, K=8, U=2,
F_w=2, Qwen3-1.7B, trainer 8x RTX 4090, rollout 2x A100-40GB PCIe TP=2.

The folder: `runs` (the setup and the simulated grid), `claims` (the paper's
numbers and the claims made of the grid), `figures` (Fig. 4, Fig. 5, Table 1
and the frontier what-if) and `would_need` (its families of the would-need
search). This module is what `harness.studies.reproduce` reads of a paper: its
name, the files it writes, where its misses are read, one engine of its setup,
and `reproduce`.
"""

from __future__ import annotations

from pathlib import Path

from harness.core.config import RunConfig
from harness.core.files import write_atomic
from harness.studies.claims import Claim
from harness.studies.reproduce.pool import is_twin
from harness.studies.reproduce.rolloutpipe import claims, runs
from harness.studies.reproduce.rolloutpipe.figures import (
    figure4,
    figure5,
    frontier_figure,
    table1_markdown,
)

PAPER = runs.PAPER
RESULTS = ("rolloutpipe.csv", "rolloutpipe_table1.md", "rolloutpipe_frontier.csv")
FIGURES = ("rolloutpipe_fig4.png", "rolloutpipe_fig5.png", "rolloutpipe_frontier.png")
READING = ("the RolloutPipe reading", "../docs/reproductions.md#rolloutpipe")


def engine() -> RunConfig:
    """One engine of the setup (all of the paper's share its GPU and framework)."""
    return runs.base_config(0, 1)


def reproduce(out: Path, figures: Path, rounds: int = 4, seed: int = 0) -> list[Claim]:
    """Run the grid; write rolloutpipe.csv, table1.md and the figures."""
    df = runs.simulate(rounds=rounds, seed=seed, traces=out / "runs" / PAPER)
    write_atomic(out / "rolloutpipe.csv", df.to_csv(index=False, float_format="%.6g"))
    write_atomic(out / "rolloutpipe_table1.md", table1_markdown(df, claims.TABLE1))
    if is_twin():  # the claims' twin: the figures and the what-if feed no claim
        return claims.claims(df)
    figures.mkdir(parents=True, exist_ok=True)
    figure4(df, figures / "rolloutpipe_fig4.png")
    figure5(df, figures / "rolloutpipe_fig5.png")
    sweep = runs.frontier_sweep(rounds=rounds, seed=seed,
                                 traces=out / "runs" / f"{PAPER}-frontier")
    write_atomic(out / "rolloutpipe_frontier.csv", sweep.to_csv(index=False, float_format="%.6g"))
    cgp = df[(df["system"] == "cgp") & (df["groups"] == 96)]
    frontier_figure(sweep, cgp, figures / "rolloutpipe_frontier.png")
    return claims.claims(df)
