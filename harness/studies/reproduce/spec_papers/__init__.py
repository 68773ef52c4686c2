"""The speculative-rollout papers of issue #37 on the simulator: the ones whose configuration
can be read, as predictions beside SkyRL's example (`skyrl_spec`, whose acceptance is the
calibrated input these runs borrow where a paper gives none).

Seven papers were read (docs/reproductions.md, "Speculation": per paper what
was read, with citations, and for the rest which field is missing). One is readable enough to
run: EfficientRollout (arXiv 2606.18967), from its authors' scripts (`efficientrollout`).
Shared: `runs` (the runs, read with SkyRL's timers). This module is what
`harness.studies.reproduce` reads of a paper: its name, the files it writes, where its misses
are read, one engine of its setup, and `reproduce`.
"""

from __future__ import annotations

from pathlib import Path

from harness.core.config import RunConfig
from harness.core.files import write_atomic
from harness.studies.claims import Claim
from harness.studies.reproduce.spec_papers import efficientrollout, runs

PAPER = "spec-papers"
RESULTS = ("spec-papers.csv",)
FIGURES: tuple[str, ...] = ()
READING = ("the speculative-rollout papers' reading",
           "../docs/reproductions.md#speculation")


def engine() -> RunConfig:
    """One engine of the setup (every run here is on A100s with vLLM)."""
    return efficientrollout.config("qwen2.5-7b", "no-sd")


def reproduce(out: Path, figures: Path, rounds: int = 4, seed: int = 0) -> list[Claim]:
    """EfficientRollout's baseline and always-on SD runs per model and drafter reading;
    `rounds` is fixed by the setup (4, the first left out of the means, as SkyRL's)."""
    sim = runs.simulate(efficientrollout.tasks(seed), Path("runs") / PAPER,
                        label="spec papers")
    cut = efficientrollout.reductions(sim)
    table = sim.merge(cut.assign(run=cut["model"] + "/rtn/" + cut["reading"]).rename(
        columns={"rollout_s": "rollout_cut_pct", "step_s": "step_cut_pct"})[
        ["run", "rollout_cut_pct", "step_cut_pct"]], on="run", how="left")
    write_atomic(out / "spec-papers.csv", table.to_csv(index=False, float_format="%.6g"))
    return efficientrollout.claims(sim, PAPER)
