"""`rolloutbench reproduce would-need`: for every missed prediction, what would it take?

A prediction the simulator misses is settled by measurement, not by tuning: for
each row of results/claims.csv with kind `prediction` that is not within its
tolerance, this searches the one free parameter the claim is most sensitive to
(its family, `harness/reproduce/would_need_families.py`) for the value at which
the simulator reproduces the paper's number (the paper's value, or the nearest
edge of its range), and sets it beside the bound physics or the paper's own
inputs put on that parameter. A reader then sees at once whether the paper's
number is plausible on that hardware. Nothing found here feeds back into the
simulator: the knobs are off in every other command.

The search is its own command (tens of simulations, minutes); `make reproduce`
does not run it. The claims writer joins the committed results/would_need.csv,
so claims.csv and claims.md carry `would_need` and `bound` columns.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.reproduce.bracket import Solution, solve
from harness.results import write_atomic

COLUMNS = ("paper", "claim", "config", "parameter", "unit", "current", "would_need",
           "physical_bound", "plausible", "note")
MAX_EVALS = 8  # new simulations per search (points another search made are free)
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


def misses(claims_csv: Path) -> list[Miss]:
    """The rows of a claims table that are predictions and not within tolerance."""
    with open(claims_csv, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return [Miss(r["paper"], r["claim"], r["config"], float(r["paper_low"]),
                 float(r["paper_high"]), float(r["harness"]), float(r["tolerance"]))
            for r in rows if r["kind"] == "prediction" and r["within"] == "False"]


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


def run(out: Path, only: list[str] | None = None, max_evals: int = MAX_EVALS,
        progress: bool = True, claims_csv: Path | None = None,
        log: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Search every missed prediction of OUT/claims.csv; writes OUT/would_need.csv.
    `only` limits the search to some rows: each item names a paper or a part of a
    claim (the other rows are kept from an existing would_need.csv, so a partial
    run does not lose them)."""
    from harness.reproduce.would_need_families import families, not_searchable

    rows = misses(claims_csv or out / "claims.csv")
    fams = families()
    kept = {} if only is None else _existing(out / "would_need.csv")
    outcomes: dict[tuple[str, str, str], dict[str, Any]] = {}
    todo: list[tuple[Family | None, Miss]] = []
    for m in rows:
        if only is not None and not any(o == m.paper or o in m.claim for o in only):
            if (m.paper, m.claim, m.config) in kept:
                outcomes[(m.paper, m.claim, m.config)] = kept[(m.paper, m.claim, m.config)]
            continue
        todo.append((next((f for f in fams if f.matches(m)), None), m))
    todo.sort(key=lambda fm: (fams.index(fm[0]) if fm[0] else len(fams),
                              fm[0].order(fm[1]) if fm[0] else 0))
    from harness.progress import Bar

    with Bar("would-need searches", len(todo), enabled=progress) as bar:  # piped: one line
        for fam, m in todo:
            bar.describe(f"would-need: {m.paper} {m.claim[:40]} {m.config}")
            result = fam.outcome(m, fam.search(m, max_evals)) if fam else not_searchable(m)
            outcomes[(m.paper, m.claim, m.config)] = result.row()
            if log is not None:
                log(f"{m.paper} | {m.claim} | {m.config}: {result.would_need} {result.unit}")
            bar.advance()
    ordered = [outcomes[(m.paper, m.claim, m.config)] for m in rows
               if (m.paper, m.claim, m.config) in outcomes]
    write_atomic(out / "would_need.csv", to_csv(ordered))
    return ordered


def to_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def _existing(path: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    if not path.exists():
        return {}
    with open(path, newline="") as fh:
        return {(r["paper"], r["claim"], r["config"]): r for r in csv.DictReader(fh)}


def joined(path: Path) -> dict[tuple[str, str, str], tuple[str, str]]:
    """(paper, claim, config) -> (would_need, bound) texts for the claims table, read
    from a would_need.csv; empty when there is none."""
    out = {}
    for key, r in _existing(path).items():
        unit = f" {r['unit']}" if r["unit"] else ""
        need = r["would_need"]
        need = f"{need}{unit}" if need not in (UNREACHABLE, NOT_SEARCHABLE) else need
        bound = r["physical_bound"] or "none"
        bound += unit if bound[-1].isdigit() else ""  # a number is in the parameter's unit
        out[key] = (need, f"{bound}; plausible: {r['plausible']}")
    return out
