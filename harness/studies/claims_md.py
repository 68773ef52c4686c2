"""The claims table for people: results/claims.md and the README's summary.

Why a document and not just a table: a reader who opens claims.md alone must
learn what a row means, why a row says "no" and where the paper's misses are
read, without the README beside it. So the page has a title, a legend of its
columns, and one section per paper that counts its hits and links the reading
of its misses; every row that misses links that reading too, beside what the
simulator would need (the would-need columns) when there is a search for it.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping

from harness.studies.claims import Claim, WouldNeed, need_of

NEED_DOC = "../docs/simulator.md#what-a-missed-prediction-would-need"

INTRO = """\
# Paper claims against the simulator

Each row sets one number a paper reports beside the simulator's value for the
same configuration. Written by `make reproduce` (every reproduction) or
`make reproduce-<paper>` (that paper's rows only; the others are kept); the
machine-readable table is [claims.csv](claims.csv), a summary per claim is
[claims_summary.md](claims_summary.md).

- **claim**, **config**: what the paper reports and for which setting.
- **reading**: where the paper supports several readings of a claim (its text
  describes a policy two ways, its authors' code defines a metric otherwise than
  its prose), each reading runs and has its own rows, named here; blank where a
  claim has one reading. Every count below is per reading.
- **kind**: `prediction` is what the simulator must get right on its own;
  `input` is a baseline observation the calibration was fitted to (shown to make
  the fit visible); `input (not fitted)` is a baseline the simulator was not
  fitted to; `consistency` is a row that holds by construction (the same samples
  through a deterministic trainer, a schedule's own period): it shows the harness
  is wired as the paper describes and is not counted as a prediction.
- **paper value**: the paper's value or range; **harness**: the simulator's.
- **tol**: the tolerance, a fraction of each bound: a row holds (**within**:
  yes) when the harness value lies in [low - tol x |low|, high + tol x |high|].
- **step source**, under each paper's title: where the engine's step times came
  from: `kernels:<gpu>:<framework>-<version>` (NVIDIA's measured-kernel database;
  `:stand-in` for a GPU priced through another one, see docs/simulator.md) or
  `roofline`. **roofline**, **within (roofline)**: the same claim simulated with
  the roofline step model, where the run used measured kernels.
- **would need**, **bound**, **model step**: for a missed prediction, the value
  of the one parameter the claim is most sensitive to at which the simulator
  would reproduce the paper, and the bound on it: for a decode step, the physical
  floor (the weights and the batch's KV cache read at the GPU's datasheet HBM
  bandwidth, the FLOPs at its datasheet peak, nothing else), so `plausible: no`
  means the paper's number needs an engine faster than physics allows; the step
  model's own value at that batch (measured kernels or roofline) is shown beside
  it as **model step**, not as a bound; see [how they are found]({need}).
- **why**: for every row that says no, the reading of that paper's misses.
"""


def _range(c: Claim) -> str:
    return f"{c.paper_low:g}" if c.paper_low == c.paper_high else \
        f"{c.paper_low:g} to {c.paper_high:g}"


def _tolerance(c: Claim) -> str:
    return f"{100 * c.tolerance:g}%"


def to_markdown(claims: list[Claim], would_need: WouldNeed | None = None,
                reading: Mapping[str, tuple[str, str]] | None = None) -> str:
    """claims.md: the title and legend, then one section per paper. `reading` maps a
    paper to (title, link) of the text that reads its misses (relative to the file);
    `would_need` adds the would-need columns."""
    reading = reading or {}
    more = would_need is not None
    lines = [INTRO.format(need=NEED_DOC).rstrip("\n")]
    papers = list(dict.fromkeys(c.paper for c in claims))
    for paper in papers:
        rows = [c for c in claims if c.paper == paper]
        title, link = reading.get(paper, ("", ""))
        why = f"[{title}]({link})" if link else "not read yet"
        hits = sum(c.within for c in rows)
        sources = ", ".join(dict.fromkeys(c.step_source for c in rows if c.step_source))
        lines += ["", f"## {paper}", "",
                  f"Step source: {sources or 'not recorded'}. "
                  f"{hits} of {len(rows)} rows hold ({_prediction_count(rows)})"
                  f"{_roofline_count(rows)}. The misses are read "
                  f"in {why}" + (f"; what each missed prediction would need: [docs]({NEED_DOC})."
                                 if more else "."), "",
                  "| claim | config | reading | kind | paper value | harness | tol | within | "
                  "roofline | within (roofline) |"
                  + (" would need | bound | model step |" if more else "") + " why |",
                  "|---|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if more else "")
                  + "---|"]
        for c in rows:
            mark = "yes" if c.within else "**no**"
            roof = "" if math.isnan(c.harness_roofline) else f"{c.harness_roofline:.4g}"
            roof_mark = {None: "", True: "yes", False: "no"}[c.within_roofline]
            line = (f"| {c.claim} | {c.config} | {c.reading} | {c.kind} | {_range(c)} | "
                    f"{c.harness:.4g} | {_tolerance(c)} | {mark} | {roof} | {roof_mark} |")
            if would_need is not None:
                need, bound, step = need_of(c, would_need)
                line += f" {need} | {bound} | {step} |"
            line += f" {'' if c.within else f'[reading]({link})' if link else why} |"
            lines.append(line)
    return "\n".join(lines) + "\n"


def _roofline_count(rows: list[Claim]) -> str:
    twins = [c for c in rows if c.within_roofline is not None]
    if not twins:
        return ""
    return f"; with the roofline step model {sum(bool(c.within_roofline) for c in twins)} of " \
           f"{len(twins)}"


def _prediction_count(rows: list[Claim]) -> str:
    """Predictions held, per reading where a paper has several, and consistency rows
    apart: "12 of 40 predictions (cap 3 of 12, priority 5 of 12); 24 of 24 consistency"."""
    preds = [c for c in rows if c.kind == "prediction"]
    text = f"{sum(c.within for c in preds)} of {len(preds)} predictions"
    readings = list(dict.fromkeys(c.reading for c in preds))
    if any(readings):  # claims with one reading are counted as such beside the others
        text += " (" + "; ".join(
            f"{r or 'one reading'} {sum(c.within for c in preds if c.reading == r)} of "
            f"{sum(c.reading == r for c in preds)}" for r in readings) + ")"
    cons = [c for c in rows if c.kind == "consistency"]
    if cons:
        text += f"; {sum(c.within for c in cons)} of {len(cons)} consistency rows"
    return text


def _on_kernels(rows: list[Claim]) -> bool:
    """Whether these rows ran on measured kernels, so that a roofline twin would differ
    (`reproduce --twin skip` runs none: its column says so, not "same")."""
    return any(c.step_source.startswith("kernels") for c in rows)


def summary_markdown(claims: list[Claim]) -> str:
    """One line per claim and reading across its configurations: hits, paper range,
    harness range (the README's table, between its claims markers), then the counts:
    predictions per paper and reading, inputs and consistency rows apart."""
    order: dict[tuple[str, str, str, str], list[Claim]] = {}
    for c in claims:
        order.setdefault((c.paper, c.claim, c.reading, c.kind), []).append(c)
    lines = ["| paper | claim | reading | kind | paper value | harness (min-max) | within | "
             "within, roofline |", "|---|---|---|---|---|---|---|---|"]
    for (paper, claim, reading, kind), rows in order.items():
        lo = min(c.paper_low for c in rows)
        hi = max(c.paper_high for c in rows)
        vals = [c.harness for c in rows if not math.isnan(c.harness)]
        got = f"{min(vals):.4g} to {max(vals):.4g}" if vals else "n/a"
        hits = sum(c.within for c in rows)
        paper_txt = f"{lo:g}" if lo == hi else f"{lo:g} to {hi:g}"
        twins = [c for c in rows if c.within_roofline is not None]
        roof = (f"{sum(bool(c.within_roofline) for c in twins)}/{len(twins)}" if twins
                else "not run" if _on_kernels(rows) else "same")
        lines.append(f"| {paper} | {claim} | {reading} | {kind} | {paper_txt} | {got} | "
                     f"{hits}/{len(rows)} | {roof} |")
    preds = [c for c in claims if c.kind == "prediction"]
    inputs = [c for c in claims if c.kind.startswith("input")]
    cons = [c for c in claims if c.kind == "consistency"]
    twins = [c for c in preds if c.within_roofline is not None]
    papers = dict.fromkeys(c.paper for c in claims)
    lines += ["", f"Predictions: {sum(c.within for c in preds)} of {len(preds)} hold with the "
              "step model each paper runs (measured kernels where covered); of the "
              f"{len(twins)} simulated both ways, {sum(c.within for c in twins)} hold with "
              f"kernels and {sum(bool(c.within_roofline) for c in twins)} with the roofline. "
              f"Inputs: {sum(c.within for c in inputs)} of {len(inputs)}. Consistency rows "
              f"(they hold by construction and are not predictions): "
              f"{sum(c.within for c in cons)} of {len(cons)}. Predictions per paper and "
              "reading:", ""]
    lines += [f"- {p}: " + _prediction_count([c for c in preds if c.paper == p])
              .replace(" predictions", "") for p in papers]
    return "\n".join(lines) + "\n"


KINDS = (("prediction", "predictions"), ("input", "inputs (fitted)"),
         ("input (not fitted)", "inputs (not fitted)"), ("consistency", "consistency rows"))


def _held(rows: list[Claim], kind: str) -> str:
    mine = [c for c in rows if c.kind == kind]
    return f"{sum(c.within for c in mine)}/{len(mine)}" if mine else "-"


def readme_summary(claims: list[Claim], links: Mapping[str, str] | None = None) -> str:
    """The README's short summary, between its claims markers: per paper and kind, the
    rows that hold of the rows there are, then one line on the step models. A newcomer
    reads the whole record in five rows; the rows themselves (hundreds, per
    configuration and reading) are claims.md's. `links` maps a paper to its reading,
    relative to the README."""
    links = links or {}
    papers = list(dict.fromkeys(c.paper for c in claims))
    lines = ["| paper | " + " | ".join(title for _, title in KINDS) + " |",
             "|---" * (len(KINDS) + 1) + "|"]
    for paper in papers:
        rows = [c for c in claims if c.paper == paper]
        name = f"[{paper}]({links[paper]})" if paper in links else paper
        lines.append(f"| {name} | " + " | ".join(_held(rows, k) for k, _ in KINDS) + " |")
    lines.append("| all | " + " | ".join(_held(claims, k) for k, _ in KINDS) + " |")
    twins = [c for c in claims if c.kind == "prediction" and c.within_roofline is not None]
    lines += ["", "Each cell: the rows that hold / the rows (one per claim, configuration and "
              "reading)."]
    if twins:
        lines += textwrap.wrap(
            f"Of the {len(twins)} predictions simulated with both step models, "
            f"{sum(c.within for c in twins)} hold with measured kernels and "
            f"{sum(bool(c.within_roofline) for c in twins)} with the roofline.", 90)
    return "\n".join(lines) + "\n"
