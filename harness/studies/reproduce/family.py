"""What every would-need family builds on: a missed prediction, a row of
would_need.csv, the family base class, and the knob four families share.

A family is a set of claims of one paper that share one mechanism, hence one
knob and one bound; each paper's folder holds its own (`<paper>/would_need.py`),
and `harness.studies.reproduce.would_need` runs them. Which parameter a family
searches was settled by a one-off sensitivity probe (each candidate knob scaled
by 0.8 and 1.25 at one configuration of the family, recorded in
docs/simulator.md): the one that moved the claim most. Three kinds of knob and
three kinds of bound:

- the decode step time at a small batch (`Knobs.small_batch_scale`, steps of at
  most 16 sequences), bounded below by the physical floor
  (`harness.sim.perf.physical_floor`: bytes at the datasheet's HBM bandwidth,
  FLOPs at its peak): an engine can be slower, never faster. The step model's own
  value (measured kernels or roofline) is reported beside it, not as the bound.
  `SmallBatchStep` below is this knob, shared by four families;
- the spread of response lengths between prompts (`Knobs.spread_scale`),
  bounded by the length statistics the paper itself reports, where it does;
- a calibrated efficiency (MFU, HBM efficiency), bounded by 1 or by the
  baseline observation it was fitted to.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.config import RunConfig
from harness.sim.knobs import FRONTIER_BATCH, Knobs
from harness.sim.perf import physical_floor
from harness.sim.presets import load_hardware, load_model
from harness.studies.reproduce.bracket import Solution, solve
from workloads.profile import Mixture, Profile, load_profile

UNREACHABLE, NOT_SEARCHABLE = "unreachable", "not searchable"
TRACES = Path("runs") / "would-need"  # where the searches' simulations leave their traces


@dataclass(frozen=True)
class Miss:
    """One missed prediction of the claims table."""

    paper: str
    claim: str
    config: str
    low: float
    high: float
    harness: float
    tolerance: float
    reading: str = ""  # one of a claim's readings (claims.Claim.reading), "" when it has one

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.claim, self.config, self.reading)

    @property
    def target(self) -> float:
        """The paper's value, or the edge of its range nearest the simulator's."""
        if math.isinf(self.high) or self.harness < self.low:
            return self.low
        return self.high if self.harness > self.high else self.low

    @property
    def ftol(self) -> float:
        """Close enough: half the claim's own tolerance (the claim then holds)."""
        return max(0.5 * self.tolerance * abs(self.target), 1e-9)


@dataclass
class Outcome:
    """One row of would_need.csv."""

    miss: Miss
    parameter: str
    unit: str = ""
    current: float | str = ""
    would_need: float | str = NOT_SEARCHABLE
    physical_bound: str = ""
    plausible: str = "n/a"
    model_step: str = ""  # the step model's own value where the parameter is a step time
    note: str = ""

    def row(self) -> dict[str, Any]:
        def fmt(v: float | str) -> str:
            return f"{v:.4g}" if isinstance(v, float) else str(v)

        m = self.miss
        return {"paper": m.paper, "claim": m.claim, "config": m.config, "reading": m.reading,
                "parameter": self.parameter, "unit": self.unit, "current": fmt(self.current),
                "would_need": fmt(self.would_need), "physical_bound": self.physical_bound,
                "plausible": self.plausible, "model_step": self.model_step, "note": self.note}


class Family:
    """Claims that share one mechanism, hence one knob and one bound.

    A subclass names its claims, the knob's search range, how to simulate a group
    of claims (one configuration) at a knob value, and how to report the answer.
    Evaluations are cached per (group, knob value), so the claims of one group
    share their simulations and seed each other's brackets."""

    paper = ""
    claims: tuple[str, ...] = ()
    parameter = ""
    unit = ""
    lo, hi = 0.25, 4.0  # the knob's search range
    log = True
    neutral = 1.0  # the knob's value in the claims table (a scale of 1 changes nothing)

    def __init__(self) -> None:
        self.cache: dict[Hashable, dict[float, dict[tuple[str, str, str], float]]] = {}

    def matches(self, m: Miss) -> bool:
        return m.paper == self.paper and m.claim in self.claims

    def group(self, m: Miss) -> Hashable:
        return m.config

    def order(self, m: Miss) -> Any:
        """Rows are searched in this order (a group evaluated first seeds the rest)."""
        return 0

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, ...], float]:
        raise NotImplementedError

    def values(self, group: Hashable, x: float) -> dict[tuple[str, str, str], float]:
        """Every claim of `group` at knob value `x`, keyed (claim, config, reading); an
        `evaluate` may key a claim with one reading by (claim, config) alone."""
        seen = self.cache.setdefault(group, {})
        if x not in seen:
            seen[x] = {(k if len(k) == 3 else (*k, "")): v
                       for k, v in self.evaluate(group, x).items()}
        return seen[x]

    def search(self, m: Miss, max_evals: int) -> Solution:
        group = self.group(m)
        known = {x: v[m.key] for x, v in self.cache.get(group, {}).items() if m.key in v}
        known.setdefault(self.neutral, m.harness)  # the table's own value costs nothing
        return solve(lambda x: self.values(group, x)[m.key], m.target, self.lo, self.hi,
                     known=known, max_evals=max_evals, ftol=m.ftol, log=self.log)

    def outcome(self, m: Miss, sol: Solution) -> Outcome:
        """The answer in the parameter's own unit, beside its bound."""
        raise NotImplementedError


def describe(sol: Solution, m: Miss, knob: str) -> str:
    """The search's own account, for the note column."""
    if sol.status == UNREACHABLE:
        return (f"unreachable for {knob} in [{sol.lo:.3g}, {sol.hi:.3g}]: closest "
                f"{sol.y:.4g} at {knob}={sol.x:.3g} (paper {m.target:g}, now {m.harness:.4g}); "
                f"{sol.evals} new sims")
    return (f"{knob}={sol.x:.3g} ({sol.status}, bracket [{sol.lo:.3g}, {sol.hi:.3g}], "
            f"{sol.evals} new sims); target {m.target:g}, now {m.harness:.4g}")


def context_per_sequence(workload: str) -> float:
    """Context tokens of a decoding sequence on average over its life: the mean
    prompt plus half the mean response (a mixture: weighted by its shares)."""
    prof = load_profile(workload)
    parts: list[tuple[Profile, float]] = (
        list(zip(prof.components, prof.weights, strict=True)) if isinstance(prof, Mixture)
        else [(prof, 1.0)])
    total = sum(w for _, w in parts)
    return sum(w * (math.exp(p.prompt_mu_log + p.prompt_sigma_log ** 2 / 2)
                    + p.mean_tokens / 2) for p, w in parts) / total


def step_times_ms(cfg: RunConfig, batch: int = FRONTIER_BATCH) -> tuple[float, float, str]:
    """(the simulator's decode step, the physical floor under it, where the step came
    from) in ms for `batch` sequences of `cfg`'s engine replica, at the workload's mean
    context per sequence. The floor (`harness.sim.perf.physical_floor`: bytes at the
    datasheet's HBM bandwidth, FLOPs at its peak, nothing else) is the bound; the step
    model's own value (measured kernels or the roofline) is reported beside it under its
    own name, never as a bound: it is the simulator's model, not physics."""
    from harness.studies.steps import decode_model

    s = cfg.sim
    hw, model = load_hardware(s.rollout_gpu), load_model(s.model)
    ctx = round(batch * context_per_sequence(cfg.workload))
    step, source = decode_model(s)
    now = 1e3 * step.steps_time(1, batch, ctx)
    return now, 1e3 * physical_floor(hw, model, s.rollout_tp, batch, ctx), source


class SmallBatchStep(Family):
    """Families whose knob is the decode step time at <= 16 running sequences."""

    parameter = f"decode step time at {FRONTIER_BATCH} sequences"
    unit = "ms"

    def reference(self, m: Miss) -> RunConfig:
        raise NotImplementedError

    def knobs(self, x: float) -> Knobs:
        return Knobs(small_batch_scale=x)

    def outcome(self, m: Miss, sol: Solution) -> Outcome:
        cfg = self.reference(m)
        now, floor, source = step_times_ms(cfg)
        where = (f"{cfg.sim.model} on {cfg.sim.rollout_tp}x {cfg.sim.rollout_gpu}, "
                 f"{cfg.workload} context")
        out = Outcome(m, self.parameter, self.unit, now, physical_bound=f">= {floor:.3g}",
                      model_step=f"{now:.3g} {self.unit} ({source})",
                      note=f"{describe(sol, m, 'scale')}; {where}")
        if sol.status != UNREACHABLE:
            out.would_need = sol.x * now
            out.plausible = "yes" if sol.x * now >= floor else "no"
        else:
            out.would_need = UNREACHABLE
        return out
