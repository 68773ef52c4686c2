"""The speculative-rollout papers of issue #37 on the simulator: the ones whose configuration
can be read, as predictions beside SkyRL's example (`skyrl_spec`, whose acceptance is the
calibrated input these runs borrow where a paper gives none).

Seven papers were read (docs/reproductions.md, "Speculation": per paper what
was read, with citations, and for the rest which field is missing). One is readable enough to
run: EfficientRollout (arXiv 2606.18967), from its authors' scripts (`efficientrollout`).
For TLT and FastGRPO the nearest readable configuration is run and written apart, never as a
claim (`nearest`). Shared: `runs` (the runs, read with SkyRL's timers; where a speculative
step stops paying). This module is what
`harness.studies.reproduce` reads of a paper: its name, the files it writes, where its misses
are read, one engine of its setup, and `reproduce`.
"""

from __future__ import annotations

from pathlib import Path

from harness.core.config import RunConfig
from harness.core.files import write_atomic
from harness.studies.claims import Claim
from harness.studies.reproduce.spec_papers import efficientrollout, nearest, runs

PAPER = "spec-papers"
RESULTS = ("spec-papers.csv", "spec-papers_nearest.csv")
FIGURES: tuple[str, ...] = ()
READING = ("the speculative-rollout papers' reading",
           "../docs/reproductions.md#speculation")


def engine() -> RunConfig:
    """One engine of the setup (every run here is on A100s with vLLM)."""
    return efficientrollout.config("qwen2.5-7b", "no-sd")


def reproduce(out: Path, figures: Path, rounds: int = 4, seed: int = 0) -> list[Claim]:
    """EfficientRollout's baseline and SD runs per model and reading, then the nearest
    configurations' runs; `rounds` is fixed by the setups (4, the first left out of the
    means, as SkyRL's)."""
    sim = runs.simulate(efficientrollout.tasks(seed), out / "runs" / PAPER,
                        label="spec papers")
    write_atomic(out / "spec-papers.csv",
                 efficientrollout.table(sim).to_csv(index=False, float_format="%.6g"))
    near = nearest.nearest(seed, out / "runs" / PAPER)  # not claims: marked as such
    write_atomic(out / "spec-papers_nearest.csv", near.to_csv(index=False, float_format="%.6g"))
    return efficientrollout.claims(sim, PAPER)
