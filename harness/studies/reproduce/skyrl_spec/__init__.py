"""SkyRL's MTP speculative-decoding example on the simulator: everything about it.

NovaSky-AI/SkyRL@a9564572:docs/content/docs/examples/spec_decode.mdx (Results, :119-137):
DAPO with Qwen3.5-9B on 8 H100, rollout with and without the policy's MTP head drafting
3 tokens in vLLM. The acceptance is the input (fitted to the mean accepted length); the
per-depth acceptance, the MTP run's rollout and step times and the speedups are
predictions.

The folder: `runs` (the setup as the authors' script runs it, the two simulated runs and
their steps) and `claims` (the published numbers and the claims made of them). No figure:
two runs, one table. This module is what `harness.studies.reproduce` reads of a paper: its
name, the files it writes, where its misses are read, one engine of its setup, and
`reproduce`.
"""

from __future__ import annotations

from pathlib import Path

from harness.core.config import RunConfig
from harness.core.files import write_atomic
from harness.studies.claims import Claim
from harness.studies.reproduce.skyrl_spec import claims, runs

PAPER = runs.PAPER
RESULTS = ("skyrl-spec.csv",)
FIGURES: tuple[str, ...] = ()
READING = ("the SkyRL reading", "../docs/reproductions.md#skyrl")


def engine() -> RunConfig:
    """One engine of the setup (both runs share its GPU and framework)."""
    return runs.config("baseline")


def reproduce(out: Path, figures: Path, rounds: int = 4, seed: int = 0) -> list[Claim]:
    """The baseline and MTP runs; `rounds` is fixed by the setup (`runs.ROUNDS`)."""
    sim = runs.simulate(seed, out / "runs" / PAPER)
    write_atomic(out / "skyrl-spec.csv", sim.to_csv(index=False, float_format="%.6g"))
    return claims.claims(sim)
