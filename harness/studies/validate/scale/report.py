"""The scale table's files (scale.csv: every row; scale.md: the summary; scale.png) and its
text."""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from harness.core.files import write_atomic
from harness.studies.validate.scale import sources
from harness.studies.validate.scale.figure import figure
from harness.studies.validate.scale.rows import shorten, summary

CLAIMS = Path("results") / "claims.csv"


def _pct(x: float, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:+.0%}" if signed else f"{x:.0%}"


def markdown(summ: pd.DataFrame) -> str:
    """The summary as a table under 100 columns: held-out n, median |error|, median signed,
    worst, within 10% and 25%, then the fitted rows' n and median |error|. A source named
    with its reading in brackets is shortened to a number, the readings listed below."""
    lines = ["| source | n | med abs | median | worst | <=10% | <=25% | fit n | fit med |",
             "|---|---|---|---|---|---|---|---|---|"]
    short, legend = shorten(list(summ["source"]))
    for r in summ.itertuples(index=False):
        lines.append(f"| {short[r.source]} | {r.n} | {_pct(r.median_abs)} | "
                     f"{_pct(r.median, True)} | {_pct(r.worst, True)} | {_pct(r.within_10)} | "
                     f"{_pct(r.within_25)} | {r.fitted_n} | {_pct(r.fitted_median_abs)} |")
    if legend:
        lines += ["", *legend]
    return "\n".join(lines) + "\n"


def gather(claims: Path, log: Callable[[str], None]) -> pd.DataFrame:
    """Every source's rows. The silicon rows are re-predicted (a few seconds); the
    reproductions' rows are read from the claims table `make reproduce` wrote."""
    from harness.studies.validate.gpu import silicon

    log("1/4 the silicon sample's serving latencies (TPOT, TTFT; the replay: 15-40 s)")
    with tempfile.TemporaryDirectory() as tmp:
        table = silicon.compare(Path(tmp))
    parts = [sources.silicon(table), sources.silicon_closed_loop(table)]
    log(f"2/4 the reproductions of published GPU runs, from {claims}")
    parts.append(sources.reproductions(claims))
    log("3/4 published weight-sync times")
    parts.append(sources.weight_sync())
    log("4/4 published and measured trainer steps")
    parts.append(sources.trainer())
    return pd.concat(parts, ignore_index=True)


def validate_scale(out: Path, claims: Path = CLAIMS,
                   log: Callable[[str], None] = print) -> str:
    """Write OUT/scale.csv and OUT/scale.md; return the markdown."""
    start = time.perf_counter()
    table = gather(claims, log)
    summ = summary(table)
    text = ("# Every external GPU measurement against the simulator\n\n"
            "Error: predicted / measured - 1. n, med abs, median, worst and the within "
            "shares are\nover held-out rows; fit n and fit med are the rows a fit saw, "
            "apart. Every row: scale.csv.\n\n" + markdown(summ))
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "scale.csv", table.to_csv(index=False, float_format="%.6g"))
    write_atomic(out / "scale.md", text)
    figure(table, out / "scale.png")
    log(f"wrote {out}/scale.md, scale.csv and scale.png ({time.perf_counter() - start:.0f} s)")
    return text
