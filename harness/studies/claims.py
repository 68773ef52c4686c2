"""Paper claims and how they are checked.

A claim row compares one harness value with the paper's value or range. It is
`within` when the harness value lies in [low, high] widened by `tolerance`
(a fraction of the bound). `kind` tells predictions (what the simulator must
get right on its own) from inputs (baseline observations the calibration was
fitted to, shown to make the fit visible).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import asdict, dataclass

COLUMNS = ("paper", "claim", "metric", "config", "paper_low", "paper_high", "harness",
           "tolerance", "within", "kind")


@dataclass(frozen=True)
class Claim:
    paper: str
    claim: str
    metric: str
    config: str
    paper_low: float
    paper_high: float
    harness: float
    tolerance: float = 0.10
    kind: str = "prediction"

    @property
    def within(self) -> bool:
        if math.isnan(self.harness):
            return False
        lo = self.paper_low - abs(self.paper_low) * self.tolerance
        hi = self.paper_high + abs(self.paper_high) * self.tolerance
        return lo <= self.harness <= hi

    def row(self) -> dict[str, object]:
        out: dict[str, object] = asdict(self)
        out["harness"] = round(self.harness, 4)
        out["within"] = self.within
        return {k: out[k] for k in COLUMNS}


# What a missed prediction would need (`rolloutbench reproduce would-need`): keyed by
# (paper, claim, config), the texts of the `would_need` and `bound` columns.
WouldNeed = dict[tuple[str, str, str], tuple[str, str]]


def _need(c: Claim, would_need: WouldNeed) -> tuple[str, str]:
    """The would-need texts of a claim; blank for rows that hold or are inputs."""
    if c.kind != "prediction" or c.within:
        return ("", "")
    return would_need.get((c.paper, c.claim, c.config), ("", ""))


def to_csv(claims: list[Claim], would_need: WouldNeed | None = None) -> str:
    """The claims table; with `would_need` (a would_need.csv exists) two more columns."""
    buf = io.StringIO()
    extra = ("would_need", "bound") if would_need is not None else ()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS + extra, lineterminator="\n")
    writer.writeheader()
    for c in claims:
        row = c.row()
        if would_need is not None:
            row.update(zip(extra, _need(c, would_need), strict=True))
        writer.writerow(row)
    return buf.getvalue()


def to_markdown(claims: list[Claim], would_need: WouldNeed | None = None) -> str:
    """A compact table for the README: one line per claim (and, with `would_need`,
    what each missed prediction would need, beside the bound on it)."""
    more = would_need is not None
    lines = ["| paper | claim | config | paper | harness | within |"
             + (" would need | bound |" if more else ""),
             "|---|---|---|---|---|---|" + ("---|---|" if more else "")]
    for c in claims:
        paper = (f"{c.paper_low:g}" if c.paper_low == c.paper_high
                 else f"{c.paper_low:g}-{c.paper_high:g}")
        mark = "yes" if c.within else "**no**"
        line = f"| {c.paper} | {c.claim} | {c.config} | {paper} | {c.harness:.4g} | {mark} |"
        if would_need is not None:
            need, bound = _need(c, would_need)
            line += f" {need} | {bound} |"
        lines.append(line)
    return "\n".join(lines) + "\n"


def summary_markdown(claims: list[Claim]) -> str:
    """One line per claim across its configurations: hits, paper range, harness range."""
    order: dict[tuple[str, str, str], list[Claim]] = {}
    for c in claims:
        order.setdefault((c.paper, c.claim, c.kind), []).append(c)
    lines = ["| paper | claim | kind | paper | harness (min-max) | within |",
             "|---|---|---|---|---|---|"]
    for (paper, claim, kind), rows in order.items():
        lo = min(c.paper_low for c in rows)
        hi = max(c.paper_high for c in rows)
        vals = [c.harness for c in rows if not math.isnan(c.harness)]
        got = f"{min(vals):.4g} to {max(vals):.4g}" if vals else "n/a"
        hits = sum(c.within for c in rows)
        paper_txt = f"{lo:g}" if lo == hi else f"{lo:g} to {hi:g}"
        lines.append(f"| {paper} | {claim} | {kind} | {paper_txt} | {got} | "
                     f"{hits}/{len(rows)} |")
    return "\n".join(lines) + "\n"
