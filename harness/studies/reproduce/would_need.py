"""`rolloutbench reproduce would-need`: for every missed prediction, what would it take?

A prediction the simulator misses is settled by measurement, not by tuning: for
each row of results/claims.csv with kind `prediction` that is not within its
tolerance, this searches the one free parameter the claim is most sensitive to
(its family: `<paper>/would_need.py` in the paper's folder, built on `family`)
for the value at which the simulator reproduces the paper's number (the paper's
value, or the nearest edge of its range), and sets it beside the bound physics
or the paper's own inputs put on that parameter. A reader then sees at once whether the paper's
number is plausible on that hardware. Nothing found here feeds back into the
simulator: the knobs are off in every other command.

The search is its own command (tens of simulations, minutes); `make reproduce`
does not run it. The claims writer joins the committed results/would_need.csv,
so claims.csv and claims.md carry `would_need` and `bound` columns.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core.files import write_atomic
from harness.studies.reproduce.family import (
    NOT_SEARCHABLE,
    UNREACHABLE,
    Family,
    Miss,
    Outcome,
)

COLUMNS = ("paper", "claim", "config", "reading", "parameter", "unit", "current",
           "would_need", "physical_bound", "plausible", "model_step", "note")
Key = tuple[str, str, str, str]  # (paper, claim, config, reading): one row of the claims
MAX_EVALS = 8  # new simulations per search (points another search made are free)


def misses(claims_csv: Path) -> list[Miss]:
    """The rows of a claims table that are predictions and not within tolerance."""
    with open(claims_csv, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return [Miss(r["paper"], r["claim"], r["config"], float(r["paper_low"]),
                 float(r["paper_high"]), float(r["harness"]), float(r["tolerance"]),
                 r.get("reading") or "")
            for r in rows if r["kind"] == "prediction" and r["within"] == "False"]


def _key(m: Miss) -> Key:
    return (m.paper, m.claim, m.config, m.reading)


def run(out: Path, only: list[str] | None = None, max_evals: int = MAX_EVALS,
        progress: bool = True, claims_csv: Path | None = None,
        log: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Search every missed prediction of OUT/claims.csv; writes OUT/would_need.csv.
    `only` limits the search to some rows: each item names a paper or a part of a
    claim (the other rows are kept from an existing would_need.csv, so a partial
    run does not lose them)."""
    rows = misses(claims_csv or out / "claims.csv")
    fams = families()
    kept = {} if only is None else _existing(out / "would_need.csv")
    outcomes: dict[Key, dict[str, Any]] = {}
    todo: list[tuple[Family | None, Miss]] = []
    for m in rows:
        if only is not None and not any(o == m.paper or o in m.claim for o in only):
            if _key(m) in kept:
                outcomes[_key(m)] = kept[_key(m)]
            continue
        todo.append((next((f for f in fams if f.matches(m)), None), m))
    todo.sort(key=lambda fm: (fams.index(fm[0]) if fm[0] else len(fams),
                              fm[0].order(fm[1]) if fm[0] else 0))
    from harness.core.progress import Bar

    with Bar("would-need searches", len(todo), enabled=progress) as bar:  # piped: one line
        for fam, m in todo:
            bar.describe(f"would-need: {m.paper} {m.claim[:40]} {m.config}")
            result = fam.outcome(m, fam.search(m, max_evals)) if fam else not_searchable(m)
            outcomes[_key(m)] = result.row()
            if log is not None:
                log(f"{m.paper} | {m.claim} | {m.config}: {result.would_need} {result.unit}")
            bar.advance()
    ordered = [outcomes[_key(m)] for m in rows if _key(m) in outcomes]
    write_atomic(out / "would_need.csv", to_csv(ordered))
    return ordered


def to_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n", restval="")
    writer.writeheader()
    writer.writerows({k: r.get(k, "") for k in COLUMNS} for r in rows)
    return buf.getvalue()


def _existing(path: Path) -> dict[Key, dict[str, Any]]:
    """The rows of a would_need.csv by their claims row (a file written before claims
    had readings has no `reading` column: its rows are the claims' one reading)."""
    if not path.exists():
        return {}
    with open(path, newline="") as fh:
        return {(r["paper"], r["claim"], r["config"], r.get("reading") or ""): r
                for r in csv.DictReader(fh)}


def joined(path: Path) -> dict[Key, tuple[str, str, str]]:
    """(paper, claim, config, reading) -> (would_need, bound, model step) texts for the
    claims table, read from a would_need.csv; empty when there is none."""
    out = {}
    for key, r in _existing(path).items():
        unit = f" {r['unit']}" if r["unit"] else ""
        need = r["would_need"]
        need = f"{need}{unit}" if need not in (UNREACHABLE, NOT_SEARCHABLE) else need
        bound = r["physical_bound"] or "none"
        bound += unit if bound[-1].isdigit() else ""  # a number is in the parameter's unit
        out[key] = (need, f"{bound}; plausible: {r['plausible']}", r.get("model_step") or "")
    return out


def families() -> list[Family]:
    """Every family, in the order their searches run: each paper's `FAMILIES`, the
    papers in this order. Imported only when a search runs (the claims writer reads
    would_need.csv through `joined` and needs none of them)."""
    from harness.studies.reproduce.april import would_need as april
    from harness.studies.reproduce.areal import would_need as areal
    from harness.studies.reproduce.pipelinerl import would_need as pipelinerl
    from harness.studies.reproduce.rolloutpipe import would_need as rolloutpipe
    from harness.studies.reproduce.rollpacker import would_need as rollpacker
    from harness.studies.reproduce.verl_async import would_need as verl_async

    return [family() for paper in (rolloutpipe, april, pipelinerl, rollpacker, verl_async,
                                   areal)
            for family in paper.FAMILIES]


def not_searchable(m: Miss) -> Outcome:
    """A missed prediction no family covers, with the reason."""
    if "(1 = holds)" in m.claim:
        why = "a yes/no ordering (0 or 1): no continuous target to bracket"
    else:
        why = "no family covers this claim"
    return Outcome(m, "", note=f"not searchable: {why}")
