"""What every would-need family builds on: a missed prediction, a row of
would_need.csv, and the family base class (`harness/studies/reproduce/would_need.py`
runs the searches)."""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from harness.studies.reproduce.bracket import Solution, solve

UNREACHABLE, NOT_SEARCHABLE = "unreachable", "not searchable"


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

    @property
    def key(self) -> tuple[str, str]:
        return (self.claim, self.config)

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
    note: str = ""

    def row(self) -> dict[str, Any]:
        def fmt(v: float | str) -> str:
            return f"{v:.4g}" if isinstance(v, float) else str(v)

        m = self.miss
        return {"paper": m.paper, "claim": m.claim, "config": m.config,
                "parameter": self.parameter, "unit": self.unit, "current": fmt(self.current),
                "would_need": fmt(self.would_need), "physical_bound": self.physical_bound,
                "plausible": self.plausible, "note": self.note}


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
        self.cache: dict[Hashable, dict[float, dict[tuple[str, str], float]]] = {}

    def matches(self, m: Miss) -> bool:
        return m.paper == self.paper and m.claim in self.claims

    def group(self, m: Miss) -> Hashable:
        return m.config

    def order(self, m: Miss) -> Any:
        """Rows are searched in this order (a group evaluated first seeds the rest)."""
        return 0

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, str], float]:
        raise NotImplementedError

    def values(self, group: Hashable, x: float) -> dict[tuple[str, str], float]:
        seen = self.cache.setdefault(group, {})
        if x not in seen:
            seen[x] = self.evaluate(group, x)
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
