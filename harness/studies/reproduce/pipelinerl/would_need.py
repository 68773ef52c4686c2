"""PipelineRL's families of the would-need search: what its missed predictions need.

Appendix A's training cost tau is the paper's own (128 / 26.02, `analytic.TAU`), so
the model's one free element is U(h), measured (the database's H100 GEMM table for
the paper's shape). Its rows move with two features of it: the height of U (how
much of peak the decoding GEMM reaches: the rates, I and the speedup) and where U
bends over (the optimal batch H and with it g_max). The simulated throughput ratio
moves with the engine's small-batch speed (`SmallBatchStep`), the max lag only with
the length of the run. The analytic families are swept directly (no simulation);
the others re-run the reproduction's runs under the knob.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from harness.core.config import RunConfig
from harness.core.trace import read_trace
from harness.core.trace_io import trace_file
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
from harness.studies.reproduce.pipelinerl.claims import APPENDIX, APPENDIX_CONFIG, APPENDIX_INPUTS
from harness.studies.reproduce.pipelinerl.runs import (
    PAPER,
    PIPE_ROUNDS,
    configs,
    summarise,
    utilisation,
)

SHAPE_ROWS = ("H", "g_max")  # where U bends over; the other predicted rows: its height


def physical_utilisation(h: Any) -> Any:
    """U(h) of the paper's GEMM at the H100's datasheet peak FLOP/s and HBM bandwidth,
    no efficiency and no padding: no kernel can do better (the would-need bound)."""
    return analytic.utilisation(h, pad=1, eta_compute=1.0, eta_memory=1.0)


def height_bound() -> float:
    """The largest x with x U(h) <= the physical U at every h = 1..H_MAX."""
    h = np.arange(1, analytic.H_MAX + 1, dtype=float)
    return float(np.min(physical_utilisation(h) / utilisation()(h)))


class PipelineUHeight(Family):
    """The rates, I and the speedup follow the height of U(h): the generation GPUs'
    share of peak sets how many of them match the trainer's (N - I) / tau."""

    paper = PAPER
    claims = tuple(f"Appendix A: {k}" for k in APPENDIX
                   if k not in SHAPE_ROWS and k not in APPENDIX_INPUTS)
    parameter = "measured U(h) scaled in height: U_x(h) = x U(h) (1: the database's)"
    unit = "x"
    lo, hi = 0.5, 2.0

    def util(self, x: float) -> analytic.Util:
        base = utilisation()
        return lambda h: base(h) * x

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, str], float]:
        case = analytic.case_study(util=self.util(x))
        return {(f"Appendix A: {k}", APPENDIX_CONFIG): float(case[k]) for k in APPENDIX}

    def outcome(self, m: Miss, sol: Solution) -> Outcome:
        bound = height_bound()
        out = Outcome(m, self.parameter, self.unit, self.neutral,
                      physical_bound=f"<= {bound:.4g}", note=describe(sol, m, "x") +
                      "; bound: x U(h) under the GEMM's datasheet roofline at every h")
        if sol.status == UNREACHABLE:
            out.would_need = UNREACHABLE
        else:
            out.would_need, out.plausible = sol.x, "yes" if sol.x <= bound else "no"
        return out


class PipelineUStretch(PipelineUHeight):
    """The optimal batch H sits where U(h) bends over, and g_max grows with H. The
    knob stretches the measured U along h: U reaches a given utilisation at h / x
    (x < 1: the GEMM needs a bigger batch for the same share of peak)."""

    claims = tuple(f"Appendix A: {k}" for k in SHAPE_ROWS)
    parameter = "measured U(h) stretched along h: U_x(h) = U(h * x) (1: the database's)"
    lo, hi = 0.2, 3.0

    def util(self, x: float) -> analytic.Util:
        base = utilisation()
        return lambda h: base(np.asarray(h, dtype=float) * x)

    def outcome(self, m: Miss, sol: Solution) -> Outcome:
        out = Outcome(m, self.parameter, self.unit, self.neutral, physical_bound="none",
                      note=describe(sol, m, "x"))
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
                path = trace_file(TRACES / "pipelinerl",
                                  name.replace(' ', '_').replace('=', ''))
                path.parent.mkdir(parents=True, exist_ok=True)
                execute(cfg, path)
                out[name] = summarise(name, read_trace(path))
    return out


class PipelineRatio(SmallBatchStep):
    """Conventional RL's rollout ends in a tail of a few long sequences per GPU."""

    paper = PAPER
    claims = ("sample throughput PipelineRL / conventional G=32",)
    lo, hi = 0.5, 3.0  # each evaluation is two 128-GPU runs (~35 s): a narrower range
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
    PIPE_ROUNDS rounds of 8 steps (96), so its max lag is capped at 95 steps (97,280
    samples); this tries runs up to twice as long."""

    paper = PAPER
    claims = ("PipelineRL max lag (samples)",)
    parameter = "simulated run length (optimizer steps)"
    unit = "steps"
    most = 2 * PIPE_ROUNDS  # rounds of 8 steps: the longest run tried (~35 s)

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
        reached = ("reached" if sol.status != UNREACHABLE else
                   "the most tried, still short: the lag settles below the paper's, so the "
                   "run length is not what misses it")
        note = (f"max lag {sol.y:,.0f} samples with {sol.x * steps:g} steps ({reached}; "
                f"{sol.evals} sims); a run length, not a physical quantity: the paper's runs "
                "are 1024 steps")
        out = Outcome(m, self.parameter, self.unit, float(now), physical_bound="none",
                      plausible="yes", note=note)
        out.would_need = UNREACHABLE if sol.status == UNREACHABLE else float(sol.x * steps)
        return out


# The families, in the order their searches run.
FAMILIES: tuple[type[Family], ...] = (PipelineUHeight, PipelineUStretch, PipelineRatio,
                                      PipelineLag)
