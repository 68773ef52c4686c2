"""One row per external measurement, and the summary of a set of them.

A row is a measured quantity and the simulator's prediction of it, with `fitted` true when a
fit of the project saw that row (a calibration's input, an overhead fit row, a transfer
model's fit point): its error says how well the fit fits, not how well the simulator predicts,
so every summary counts it apart.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

COLUMNS = ("source", "case", "quantity", "unit", "measured", "predicted", "error", "fitted",
           "reference")
BANDS = (0.10, 0.25)  # the within-band shares the summary reports


def frame(records: list[dict], source: str, reference: str) -> pd.DataFrame:
    """Rows of one source from dicts holding case, quantity, unit, measured, predicted and
    fitted; the error is predicted / measured - 1 (NaN where either side is missing)."""
    df = pd.DataFrame(records, columns=["case", "quantity", "unit", "measured", "predicted",
                                        "fitted"])
    df.insert(0, "source", source)
    df["measured"] = pd.to_numeric(df["measured"], errors="coerce")
    df["predicted"] = pd.to_numeric(df["predicted"], errors="coerce")
    ok = (df["measured"] > 0) & df["predicted"].notna()
    df["error"] = np.where(ok, df["predicted"] / df["measured"].where(ok, 1.0) - 1, np.nan)
    df["fitted"] = df["fitted"].astype(bool)
    df["reference"] = reference
    return df[list(COLUMNS)]


def _stats(errors: pd.Series) -> dict[str, float]:
    e = errors.dropna()
    if e.empty:
        return {"n": 0, "median_abs": math.nan, "median": math.nan, "worst": math.nan,
                **{f"within_{int(b * 100)}": math.nan for b in BANDS}}
    worst = e.iloc[int(np.argmax(e.abs().to_numpy()))]
    return {"n": int(len(e)), "median_abs": float(e.abs().median()),
            "median": float(e.median()), "worst": float(worst),
            **{f"within_{int(b * 100)}": float((e.abs() <= b + 1e-9).mean()) for b in BANDS}}


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per source, then pooled: the held-out rows' statistics beside the fitted rows' (n and
    median |error|). Two pooled lines: every held-out row alike (the silicon sample's
    hundreds of rows weigh most), and each source alike (the median of the sources' medians)."""
    out = []
    for source, g in table.groupby("source", sort=False):
        held = _stats(g.loc[~g["fitted"], "error"])
        fit = _stats(g.loc[g["fitted"], "error"])
        out.append({"source": source, **held, "fitted_n": fit["n"],
                    "fitted_median_abs": fit["median_abs"],
                    "unpriced": int(g["error"].isna().sum())})
    per = pd.DataFrame(out)
    pooled = _stats(table.loc[~table["fitted"], "error"])
    fit_all = _stats(table.loc[table["fitted"], "error"])
    rows = [{"source": "pooled: every held-out row", **pooled, "fitted_n": fit_all["n"],
             "fitted_median_abs": fit_all["median_abs"],
             "unpriced": int(table["error"].isna().sum())}]
    judged = per[per["n"] > 0]
    rows.append({"source": "pooled: each source alike", "n": int(judged["n"].sum()),
                 "median_abs": float(judged["median_abs"].median()) if len(judged) else math.nan,
                 "median": float(judged["median"].median()) if len(judged) else math.nan,
                 "worst": math.nan, **{f"within_{int(b * 100)}": math.nan for b in BANDS},
                 "fitted_n": fit_all["n"], "fitted_median_abs": math.nan, "unpriced": 0})
    return pd.concat([per, pd.DataFrame(rows)], ignore_index=True)


def shorten(names: list[str], longest: int = 28) -> tuple[dict[str, str], list[str]]:
    """Short names for sources named with a reading in brackets ("verl-async (lengths from
    gen)" -> "verl-async [1]") when longer than `longest`, and the legend lines."""
    short, legend = {}, {}
    for name in names:
        if " (" in name and name.endswith(")") and len(name) > longest:
            head, reading = name.split(" (", 1)
            if reading[:-1] not in legend:
                legend[reading[:-1]] = str(len(legend) + 1)
            short[name] = f"{head} [{legend[reading[:-1]]}]"
        else:
            short[name] = name
    return short, [f"[{number}] {reading}" for reading, number in legend.items()]
