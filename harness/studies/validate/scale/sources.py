"""The readers: one per source of external GPU measurements, each marking its fitted rows.

Every reader returns `rows.frame` rows. What a reader counts as fitted is what the project's
own fit saw, named where that fit is declared (so a change of the fit's split shows here):

- silicon: aiconfigurator-core's measured serving TPOT and TTFT against the kernels step
  model; TPOT rows in the per-step overhead's fit split (`overhead.split`) are fitted; TTFT
  is never fitted.
- the reproductions of published GPU runs (verl's fully-async READMEs, AReaL's benchmark):
  their rows of the claims table, one source per reading; `input` rows are the calibration's
  fit, every other kind (`input (not fitted)`, `prediction`, `consistency`) is held out.
- weight sync: published synchronisation times against the weight-sync check's prediction.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.studies.validate.scale.rows import frame

SILICON_REF = "aiconfigurator_core/systems/silicon_sample.csv (aiconfigurator-core)"
# The reproductions whose rows are measurements of real GPU runs (not a paper's simulated
# or illustrative figures): verl's READMEs and AReaL's benchmark.
GPU_RUN_PAPERS = ("verl-async", "areal")


def silicon(table: pd.DataFrame) -> pd.DataFrame:
    """TPOT and TTFT per usable silicon row (`silicon.compare`'s table)."""
    from harness.studies.validate.gpu import overhead

    fit_ids = set(overhead.split(table)[0]["id"])
    recs = []
    for r in table.itertuples(index=False):
        case = str(r.id)
        recs.append({"case": case, "quantity": "TPOT", "unit": "ms",
                     "measured": r.measured_ms, "predicted": r.kernels_tpot_ms,
                     "fitted": case in fit_ids})
        recs.append({"case": case, "quantity": "TTFT", "unit": "ms",
                     "measured": r.measured_ttft_ms, "predicted": r.kernels_ttft_ms,
                     "fitted": False})
    df = frame(recs, "silicon", SILICON_REF)
    df.loc[df["quantity"] == "TTFT", "source"] = "silicon TTFT"
    df.loc[df["quantity"] == "TPOT", "source"] = "silicon TPOT"
    return df


def reproductions(claims_csv: Path, papers: tuple[str, ...] = GPU_RUN_PAPERS) -> pd.DataFrame:
    """The claims table's rows of `papers`: the published value (the middle of a range) against
    the harness's, a source per paper and reading."""
    claims = pd.read_csv(claims_csv)
    parts = []
    for (paper, reading), g in claims[claims["paper"].isin(papers)].groupby(
            ["paper", claims["reading"].fillna("")], sort=False):
        recs = [{"case": f"{r.config}: {r.claim}", "quantity": r.metric, "unit": "",
                 "measured": (r.paper_low + r.paper_high) / 2, "predicted": r.harness,
                 "fitted": r.kind == "input"} for r in g.itertuples(index=False)]
        name = f"{paper} ({reading})" if reading else str(paper)
        parts.append(frame(recs, name, f"{claims_csv} (make reproduce)"))
    return pd.concat(parts, ignore_index=True) if parts else frame([], "none", "")


def weight_sync() -> pd.DataFrame:
    """verl's published sync times (without checkpoint-engine) against the weight-sync
    check's prediction; nothing is fitted to them."""
    from harness.studies.validate import weight_sync as ws

    recs = [{"case": f"{r['model']} {r['ranks']}", "quantity": "sync", "unit": "s",
             "measured": r["plain_s"], "predicted": r["bytes_s"], "fitted": False}
            for r in ws.rows()]
    return frame(recs, "weight sync", ws.SOURCE)
