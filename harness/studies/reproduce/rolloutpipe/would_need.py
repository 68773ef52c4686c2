"""RolloutPipe's family of the would-need search: what CGP and CGP+FGD's misses need.

CGP+FGD at F_w=2 runs 2 groups = 16 sequences at a time, so its gains hang on the
engine's speed at a small batch (`SmallBatchStep`); CGP's early dispatch hangs on
when the first groups end, the spread of response lengths between prompts. Each
search re-runs the three systems at one point of the grid exactly as the claims
table does (`claims` on a part of the grid), so at the neutral knob it gives the
table's value.
"""

from __future__ import annotations

import re
from collections.abc import Hashable

from harness.core.config import RunConfig
from harness.sim.knobs import Knobs, active
from harness.studies.reproduce.bracket import Solution
from harness.studies.reproduce.family import (
    TRACES,
    UNREACHABLE,
    Family,
    Miss,
    Outcome,
    SmallBatchStep,
    describe,
)
from harness.studies.reproduce.rolloutpipe.claims import claims as grid_claims
from harness.studies.reproduce.rolloutpipe.runs import PAPER, base_config, simulate
from workloads.profile import Profile, load_profile


def _point(config: str) -> tuple[str, int]:
    """'lsat-ar R=32' -> ('lsat-ar', 32)."""
    found = re.fullmatch(r"(\S+) R=(\d+)", config)
    if found is None:
        raise ValueError(f"not a RolloutPipe point: {config!r}")
    return found[1], int(found[2])


def _rolloutpipe_point(config: str, knobs: Knobs) -> dict[tuple[str, str, str], float]:
    """The systems at one point (four rounds, as the grid; CGP+FGD in the cap reading,
    the only one searched), every claim of it, keyed (claim, config, reading)."""
    workload, groups = _point(config)
    with active(knobs):
        df = simulate(rounds=4, seed=0, traces=TRACES / "rolloutpipe", progress=False,
                      workloads=(workload,), groups=(groups,), priority=False)
    return {c.key: c.harness
            for c in grid_claims(df, workloads=(workload,), groups=(groups,))}


class RolloutPipeFGD(SmallBatchStep):
    """CGP+FGD at F_w=2 runs 2 groups = 16 sequences: the engine's small-batch speed.
    That is the cap reading's (and a row without a reading's) only: in the priority
    reading every request is submitted and the engine never runs a batch that small
    for long, so no step time explains its misses (they are not searched)."""

    paper = PAPER
    claims = ("CGP+FGD r2te reduction vs Slime %", "CGP share of the reduction %",
              "CGP+FGD further reduction vs CGP %", "CGP+FGD waiting ratio %",
              "waiting ratio reduction vs Slime %", "cgp-fgd first dispatch",
              "cgp-fgd rollout-to-train-end")

    def matches(self, m: Miss) -> bool:
        return super().matches(m) and m.reading in ("", "cap")

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, str, str], float]:
        return _rolloutpipe_point(str(group), self.knobs(x))

    def reference(self, m: Miss) -> RunConfig:
        cfg = base_config(0, 4)
        cfg.workload = _point(m.config)[0]
        return cfg


class RolloutPipeCGP(Family):
    """CGP's early dispatch and its gain at R=32 hang on when the first groups end:
    the spread of response lengths between prompts."""

    paper = PAPER
    claims = ("CGP r2te reduction vs Slime % (derived: share x total)", "cgp first dispatch",
              "cgp rollout-to-train-end")
    parameter = "sigma_between (log-spread of response lengths between prompts)"
    lo, hi = 0.25, 2.5

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, str, str], float]:
        return _rolloutpipe_point(str(group), Knobs(spread_scale=x))

    def outcome(self, m: Miss, sol: Solution) -> Outcome:
        prof = load_profile(_point(m.config)[0])
        assert isinstance(prof, Profile)
        out = Outcome(m, self.parameter, "", prof.sigma_between,
                      note=f"{describe(sol, m, 'x sigma_between')}; the paper reports only "
                           "the mean response length (3.3k-3.6k), no spread")
        out.would_need = (UNREACHABLE if sol.status == UNREACHABLE
                          else sol.x * prof.sigma_between)
        return out


class RolloutPipePriority(Family):
    """FGD's priority reading on an engine that admits in arrival order (SGLang's default
    FCFS, docs/readings.md) admits exactly as CGP does: its rows are CGP's by
    construction (share of the reduction 100%, further reduction 0%), so no engine or
    workload parameter moves them apart. Each miss says so instead of being searched."""

    paper = PAPER
    claims = RolloutPipeFGD.claims
    parameter = "none (the priority reading admits as CGP does)"

    def matches(self, m: Miss) -> bool:
        return super().matches(m) and m.reading == "priority"

    def search(self, m: Miss, max_evals: int) -> None:  # type: ignore[override]
        return None

    def outcome(self, m: Miss, sol: Solution | None) -> Outcome:
        return Outcome(m, self.parameter, note=(
            "not searchable: under the priority reading CGP+FGD admits as CGP does on an "
            "arrival-order engine, so this row is CGP's value by construction"))


# The families, in the order their searches run.
FAMILIES: tuple[type[Family], ...] = (RolloutPipeFGD, RolloutPipeCGP, RolloutPipePriority)
