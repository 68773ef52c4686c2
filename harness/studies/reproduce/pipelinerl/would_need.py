"""PipelineRL's families of the would-need search: what its missed predictions need.

Appendix A's optimum moves with the training cost (trainer MFU) and, for the
optimal batch H, with the shape of U(h); the simulated throughput ratio with the
engine's small-batch speed (`SmallBatchStep`); the max lag only with the length
of the run. The analytic families are swept directly (no simulation); the others
re-run the reproduction's runs under the knob.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from harness.core.config import RunConfig
from harness.core.trace import read_trace
from harness.run.execute import execute
from harness.sim.knobs import Knobs, active
from harness.studies.analytic import pipelinerl as analytic
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
from harness.studies.reproduce.pipelinerl.claims import APPENDIX, APPENDIX_CONFIG
from harness.studies.reproduce.pipelinerl.runs import PAPER, configs, summarise, utilisation


class PipelineAnalytic(Family):
    """Appendix A's optimum moves with the training cost tau = 3 / MFU: the paper's
    conventional training rate (26.02 tokens/flash = 128 / tau) pins tau itself."""

    paper = PAPER
    claims = tuple(f"Appendix A: {k}" for k in APPENDIX if k != "H")
    parameter = "trainer MFU (tau = 3 / MFU flashes per trained token)"
    lo, hi = 0.1, 3.0
    now = neutral = analytic.TRAIN_MFU

    def case(self, x: float) -> dict[str, float]:
        return analytic.case_study(tau=analytic.train_tau(x), util=utilisation())

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, str], float]:
        case = self.case(x)
        return {(f"Appendix A: {k}", APPENDIX_CONFIG): float(case[k]) for k in APPENDIX}

    def outcome(self, m: Miss, sol: Solution) -> Outcome:
        out = Outcome(m, self.parameter, "fraction of peak", self.now, physical_bound="<= 1",
                      note=describe(sol, m, "value"))
        if sol.status == UNREACHABLE:
            out.would_need = UNREACHABLE
        else:
            out.would_need, out.plausible = sol.x, "yes" if sol.x <= 1 else "no"
        return out


class PipelineAnalyticH(PipelineAnalytic):
    """The optimal batch H sits where U(h) bends over. The reproduction's U(h) is
    measured, so the knob stretches it along h: U reaches a given utilisation at h / x
    (x < 1: the GEMM needs a bigger batch for the same share of peak)."""

    claims = ("Appendix A: H",)
    parameter = "measured U(h) stretched along h: U_x(h) = U(h * x) (1: the database's)"
    lo, hi = 0.2, 3.0
    now = neutral = 1.0

    def case(self, x: float) -> dict[str, float]:
        base = utilisation()
        return analytic.case_study(util=lambda h: base(np.asarray(h, dtype=float) * x))

    def outcome(self, m: Miss, sol: Solution) -> Outcome:
        out = Outcome(m, self.parameter, "x", self.now, physical_bound="none",
                      note=describe(sol, m, "value"))
        out.would_need = UNREACHABLE if sol.status == UNREACHABLE else sol.x
        return out


def _pipelinerl_runs(names: tuple[str, ...], knobs: Knobs, rounds: int | None = None
                     ) -> dict[str, dict[str, float]]:
    """`summarise` of the named runs of the reproduction under `knobs`."""
    out = {}
    with active(knobs):
        for name, cfg in configs(0).items():
            if name in names:
                cfg.rounds = rounds or cfg.rounds
                path = TRACES / "pipelinerl" / f"{name.replace(' ', '_').replace('=', '')}.jsonl"
                path.parent.mkdir(parents=True, exist_ok=True)
                execute(cfg, path)
                out[name] = summarise(name, read_trace(path))
    return out


class PipelineRatio(SmallBatchStep):
    """Conventional RL's rollout ends in a tail of a few long sequences per GPU."""

    paper = PAPER
    claims = ("sample throughput PipelineRL / conventional G=32",)
    lo, hi = 0.5, 3.0  # each evaluation is two 128-GPU runs (~25 s): a narrower range
    budget = 5

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, str], float]:
        runs = _pipelinerl_runs(("pipelinerl", "conventional G=32"), self.knobs(x))
        ratio = runs["pipelinerl"]["samples_per_s"] / runs["conventional G=32"]["samples_per_s"]
        return {(self.claims[0], "Qwen2.5-7B 128xH100"): ratio}

    def search(self, m: Miss, max_evals: int) -> Solution:
        return super().search(m, min(max_evals, self.budget))

    def reference(self, m: Miss) -> RunConfig:
        return configs(0)["conventional G=32"]


class PipelineLag(Family):
    """A lag in optimizer steps can be no longer than the run: the reproduction runs
    4 rounds of 8 steps, so its max lag is capped at 31 steps (31,744 samples)."""

    paper = PAPER
    claims = ("PipelineRL max lag (samples)",)
    parameter = "simulated run length (optimizer steps)"
    unit = "steps"
    most = 8  # rounds of 8 steps: the longest run tried (~27 s)

    def lag(self, rounds: int) -> float:
        seen = self.cache.setdefault("lag", {})
        if rounds not in seen:
            runs = _pipelinerl_runs(("pipelinerl",), Knobs(), rounds)
            seen[rounds] = {self.claims[0]: runs["pipelinerl"]["lag_max_samples"]}
        return seen[rounds][self.claims[0]]

    def search(self, m: Miss, max_evals: int) -> Solution:
        """Integer bisection on rounds for the first that reaches the paper's lag."""
        lo, hi, evals = configs(0)["pipelinerl"].rounds, self.most, 1
        if self.lag(hi) < m.target:
            return Solution(hi, UNREACHABLE, self.lag(hi), evals, lo, hi)
        while hi - lo > 1 and evals < max_evals:
            mid = (lo + hi) // 2
            evals += 1
            lo, hi = (mid, hi) if self.lag(mid) < m.target else (lo, mid)
        return Solution(hi, "found", self.lag(hi), evals, lo, hi)

    def outcome(self, m: Miss, sol: Solution) -> Outcome:
        cfg = configs(0)["pipelinerl"]
        steps = cfg.groups // cfg.update_groups  # optimizer steps per round (8)
        now = cfg.rounds * steps
        reached = "reached" if sol.status != UNREACHABLE else "the most tried, still short"
        note = (f"max lag {sol.y:,.0f} samples with {sol.x * steps:g} steps ({reached}; "
                f"{sol.evals} sims); a run length, not a physical quantity: the paper's runs "
                "are far longer")
        out = Outcome(m, self.parameter, self.unit, float(now), physical_bound="none",
                      plausible="yes", note=note)
        out.would_need = UNREACHABLE if sol.status == UNREACHABLE else float(sol.x * steps)
        return out


# The families, in the order their searches run.
FAMILIES: tuple[type[Family], ...] = (PipelineAnalytic, PipelineAnalyticH, PipelineRatio,
                                      PipelineLag)
