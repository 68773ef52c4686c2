"""`make bench`'s table: one row per target, the base against this tree.

Kept apart from the timing so that it can be tested without timing anything: a row
holds the repeats' values on each side and the paired ratios (base over this tree, so
that above 1 is this tree better), and a target says what must hold: a ratio of at least
N (judged on the median ratio) or a value of this tree of at most N (its median).
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

WIDTH = 100  # the project's output width


@dataclass(frozen=True)
class Target:
    """`ratio`: the median ratio base / this tree at least `value`; `most`: this tree's
    median at most `value` (in the row's unit)."""

    kind: str
    value: float

    def text(self, unit: str) -> str:
        if self.kind == "ratio":
            return f">= {self.value:g}x"
        return f"<= {self.value:g}{' ' + unit if unit else ''}"


@dataclass
class Row:
    measure: str
    unit: str
    target: Target
    base: list[float] = field(default_factory=list)
    head: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)  # paired: base / this tree

    def ratio_values(self) -> list[float]:
        """The paired ratios, or (one value a side) the ratio of the medians."""
        if self.ratios:
            return self.ratios
        if self.base and self.head and median(self.head) > 0:
            return [median(self.base) / median(self.head)]
        return []

    def holds(self) -> bool | None:
        """Whether the target holds (None: this tree was not measured)."""
        if self.target.kind == "ratio":
            ratios = self.ratio_values()
            return median(ratios) >= self.target.value if ratios else None
        return median(self.head) <= self.target.value if self.head else None


def median(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def number(value: float) -> str:
    """Three significant figures at most, no exponent: 61.3, 0.742, 1,234."""
    if math.isnan(value):
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if abs(value) >= 1 else f"{value:.3f}"


def ratio(value: float) -> str:
    """A ratio with two decimals (one from 10x): 0.99, 1.89, 12.3."""
    if math.isnan(value):
        return "-"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def spread(values: list[float], suffix: str = "") -> str:
    """'61.3 [60.1-63.0]' (median and range), or one value alone, or '-' for none; with
    the suffix 'x' a ratio ('0.99x [0.95-1.00]')."""
    if not values:
        return "-"
    fmt = ratio if suffix == "x" else number
    mid = fmt(median(values)) + suffix
    if len(values) == 1:
        return mid
    return f"{mid} [{fmt(min(values))}-{fmt(max(values))}]"


HEADER = ("measure", "base", "this tree", "ratio", "target", "holds")


def cells(row: Row) -> tuple[str, ...]:
    holds = row.holds()
    return (f"{row.measure}, {row.unit}" if row.unit else row.measure, spread(row.base),
            spread(row.head), spread(row.ratio_values(), "x"), row.target.text(row.unit),
            "-" if holds is None else "yes" if holds else "no")


def text_table(rows: list[Row]) -> str:
    """The table as aligned text, at most WIDTH columns (the measure column cut if not)."""
    table = [HEADER, *(cells(r) for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(HEADER))]
    over = sum(widths) + 2 * (len(widths) - 1) - WIDTH
    if over > 0:
        widths[0] -= over
    lines = []
    for line in table:
        first = line[0][:widths[0]].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(line[1:], widths[1:], strict=True)]
        lines.append("  ".join([first, *rest]).rstrip())
    return "\n".join(lines)


def markdown_table(rows: list[Row]) -> str:
    """The table as markdown (the same cells as the text table)."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(cells(r)) + " |" for r in rows]
    return "\n".join(lines) + "\n"


CSV_FIELDS = ("measure", "unit", "base_median", "base_min", "base_max", "head_median",
              "head_min", "head_max", "ratio_median", "ratio_min", "ratio_max", "repeats",
              "target", "holds")


def csv_table(rows: list[Row]) -> str:
    """Every value at full precision, one line a row (empty where not measured)."""
    def three(values: list[float]) -> list[str]:
        return [repr(f(values)) for f in (median, min, max)] if values else ["", "", ""]

    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(CSV_FIELDS)
    for r in rows:
        holds = r.holds()
        out.writerow([r.measure, r.unit, *three(r.base), *three(r.head),
                      *three(r.ratio_values()), max(len(r.base), len(r.head)),
                      r.target.text(r.unit), "" if holds is None else str(holds).lower()])
    return buf.getvalue()


def write(rows: list[Row], out: Path, notes: list[str]) -> tuple[Path, Path]:
    """The markdown table (with the run's notes under it) at `out` and the CSV beside
    it (`out` with the suffix .csv)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    md = markdown_table(rows) + "".join(f"\n- {n}" for n in notes) + ("\n" if notes else "")
    out.write_text(md)
    path = out.with_suffix(".csv")
    path.write_text(csv_table(rows))
    return out, path
