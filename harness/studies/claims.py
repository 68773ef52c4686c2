"""Paper claims and how they are checked.

A claim row compares one harness value with the paper's value or range. It is
`within` when the harness value lies in [low, high] widened by `tolerance`
(a fraction of the bound). `kind` tells predictions (what the simulator must
get right on its own) from inputs (baseline observations the calibration was
fitted to, shown to make the fit visible) and from consistency rows (they hold by
construction: the same samples through a deterministic trainer, a schedule's own
period; kept to show the harness is wired as the paper describes, counted apart).

Where a paper supports several readings of a claim (a policy its text describes two
ways, a definition its code settles otherwise than its prose), each reading runs and
gets its own rows: `reading` names it ("" for a claim with one reading), and every
table counts each reading separately.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace

COLUMNS = ("paper", "claim", "metric", "config", "reading", "paper_low", "paper_high",
           "harness", "tolerance", "within", "kind", "step_source", "harness_roofline",
           "within_roofline")
KINDS = ("prediction", "input", "input (not fitted)", "consistency")
NEED_COLUMNS = ("would_need", "bound", "model_step")


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
    held: bool | None = None  # `within` as a claims.csv recorded it (rows read back)
    # Where the engine's step times came from, and the same claim with the roofline
    # step model (NaN where the run already used the roofline: nothing to compare).
    step_source: str = ""
    harness_roofline: float = math.nan
    held_roofline: bool | None = None
    reading: str = ""  # which of the paper's readings this row runs ("" when it has one)

    @property
    def key(self) -> tuple[str, str, str]:
        """What tells this row from every other row of its paper."""
        return (self.claim, self.config, self.reading)

    def holds(self, value: float) -> bool:
        if math.isnan(value):
            return False
        # an open end (inf) stays open: inf * 0 would make the bound NaN (PipelineRL's lag)
        lo = self.paper_low - (abs(self.paper_low) * self.tolerance
                               if math.isfinite(self.paper_low) else 0.0)
        hi = self.paper_high + (abs(self.paper_high) * self.tolerance
                                if math.isfinite(self.paper_high) else 0.0)
        return lo <= value <= hi

    @property
    def within(self) -> bool:
        if self.held is not None:  # read from a table: its verdict, made at full precision
            return self.held
        return self.holds(self.harness)

    @property
    def within_roofline(self) -> bool | None:
        """The verdict under the roofline; None when no roofline twin was run."""
        if self.held_roofline is not None:
            return self.held_roofline
        return None if math.isnan(self.harness_roofline) else self.holds(self.harness_roofline)

    def row(self) -> dict[str, object]:
        out: dict[str, object] = asdict(self)
        out["harness"] = round(self.harness, 4)
        out["within"] = self.within
        out["harness_roofline"] = ("" if math.isnan(self.harness_roofline)
                                   else round(self.harness_roofline, 4))
        out["within_roofline"] = "" if self.within_roofline is None else self.within_roofline
        return {k: out[k] for k in COLUMNS}


# What a missed prediction would need (`rolloutbench reproduce would-need`): keyed by
# (paper, claim, config, reading), the texts of the `would_need`, `bound` (physical)
# and `model_step` (the step model's own value, where the parameter is a step) columns.
WouldNeed = dict[tuple[str, str, str, str], tuple[str, str, str]]


def need_of(c: Claim, would_need: WouldNeed) -> tuple[str, str, str]:
    """The would-need texts of a claim; blank for rows that hold or are not predictions."""
    if c.kind != "prediction" or c.within:
        return ("", "", "")
    return would_need.get((c.paper, *c.key), ("", "", ""))


def to_csv(claims: list[Claim], would_need: WouldNeed | None = None) -> str:
    """The claims table; with `would_need` (a would_need.csv exists) two more columns."""
    buf = io.StringIO()
    extra = NEED_COLUMNS if would_need is not None else ()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS + extra, lineterminator="\n")
    writer.writeheader()
    for c in claims:
        row = c.row()
        if would_need is not None:
            row.update(zip(extra, need_of(c, would_need), strict=True))
        writer.writerow(row)
    return buf.getvalue()


class ClaimsFileError(ValueError):
    """A claims.csv that cannot be read back (its message names the file and line)."""


def from_csv(text: str, source: str = "claims.csv") -> list[Claim]:
    """The claims of a table written by `to_csv` (extra columns are ignored: the
    would-need texts are joined again on writing). `within` is kept as written."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in COLUMNS[:11] if c != "reading" and c not in (reader.fieldnames or ())]
    if missing:
        raise ClaimsFileError(f"{source}: not a claims table (no column {missing[0]!r})")
    out = []
    for line, r in enumerate(reader, start=2):
        if r["kind"] not in KINDS:
            raise ClaimsFileError(f"{source}: line {line}: kind is {r['kind']!r}, expected one "
                                  f"of {', '.join(KINDS)}")
        try:
            out.append(Claim(r["paper"], r["claim"], r["metric"], r["config"],
                             _number(r["paper_low"]), _number(r["paper_high"]),
                             _number(r["harness"]), _number(r["tolerance"]), r["kind"],
                             _flag(r["within"]), r.get("step_source") or "",
                             _number(r["harness_roofline"]) if r.get("harness_roofline")
                             else math.nan,
                             _flag(r["within_roofline"]) if r.get("within_roofline") else None,
                             r.get("reading") or ""))
        except (TypeError, ValueError) as err:
            raise ClaimsFileError(f"{source}: line {line}: {err}") from None
    return out


def _number(text: str) -> float:
    """A number as written: "96" stays an int, so that writing it again gives "96"
    (a kept row must come back byte for byte, not as "96.0")."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def _flag(text: str) -> bool:
    if text not in ("True", "False"):
        raise ValueError(f"within is {text!r}, expected True or False")
    return text == "True"


def as_written(claims: Iterable[Claim]) -> list[Claim]:
    """The claims as claims.csv records them (harness rounded, verdict kept), so a
    table rendered from fresh claims and one rendered from the file read back agree."""
    return [replace(c, harness=c.row()["harness"], held=c.within,
                    harness_roofline=(c.harness_roofline if math.isnan(c.harness_roofline)
                                      else round(c.harness_roofline, 4)),
                    held_roofline=c.within_roofline) for c in claims]


def merge(old: list[Claim], new: list[Claim], papers: Iterable[str],
          order: Iterable[str] = ()) -> list[Claim]:
    """`old` with every row of `papers` replaced by `new`'s: one paper's reproduction
    keeps the other papers' rows. Papers come in `order`, then any others in the order
    they first appear; each paper's rows keep the order they were made in."""
    redone = set(papers)
    rows = [c for c in old if c.paper not in redone] + list(new)
    rank = {p: i for i, p in enumerate(dict.fromkeys([*order, *(c.paper for c in rows)]))}
    return sorted(rows, key=lambda c: rank[c.paper])  # stable: rows keep their order
