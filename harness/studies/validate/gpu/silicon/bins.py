"""Errors per bin, never pooled: one pooled median hides bins whose errors offset (decode
alone ran from -18% at little prefill per step to -74% at much). Each dimension is binned on
its own (prefill load, batch, layout, backend, GPU, precision, dense/MoE); every bin is
reported, and a bin with at least MIN_N rows is held to the target (median |error| <= 15%).
Expert-parallel and attention-DP layouts, a few dozen rows each, are also judged pooled
(`parallel`). The rows the per-step overhead was fitted on (`overhead_fit`) are in no bin:
a bin judges only rows no fit has seen.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import pandas as pd

MODELS = ("kernels", "roofline")  # the step models compared with the silicon sample

TARGET = 0.15  # median |relative error| a bin must reach
MIN_N = 50  # rows a bin needs before it is held to the target
# Prompt tokens prefilled per decode step (batch * isl / osl), bins closed on the right.
LOAD_BINS = ((40, "<=40"), (256, "41-256"), (1024, "257-1024"), (4096, "1025-4096"),
             (math.inf, ">4096"))
BUCKETS = ((1, 1, "1"), (2, 4, "2-4"), (5, 16, "5-16"), (17, 64, "17-64"),
           (65, 256, "65-256"), (257, 10**9, ">256"))
READINGS = (("tpot", "_tpot_err"), ("decode", "_err"), ("ttft", "_ttft_err"))


def load_bin(tokens: float) -> str:
    """The prefill-load bin of `tokens` prompt tokens per decode step."""
    return next(label for top, label in LOAD_BINS if tokens <= top)


def batch_bin(batch: int) -> str:
    return next(label for lo, hi, label in BUCKETS if lo <= batch <= hi)


def layout(tp: int, ep: int, attention_dp: int) -> str:
    """TP, with EP and attention DP where they are used: TP8, TP8 EP8, TP8 DP8."""
    return f"TP{tp}" + (f" EP{ep}" if ep > 1 else "") \
        + (f" DP{attention_dp}" if attention_dp > 1 else "")


def parallel(ep: int, attention_dp: int) -> str:
    """The pooled layout bin: TP alone, or experts or attention spread ("EP or DP": expert
    parallel or attention DP, DP as in `layout`'s labels)."""
    return "EP or DP" if ep > 1 or attention_dp > 1 else "TP only"


def _rowwise(fn: Callable[..., str], *cols: str) -> Callable[[pd.DataFrame], pd.Series]:
    return lambda df: pd.Series([fn(*v) for v in zip(*(df[c] for c in cols), strict=True)],
                                index=df.index, dtype=object)


DIMENSIONS: tuple[tuple[str, Callable[[pd.DataFrame], pd.Series]], ...] = (
    ("load", _rowwise(load_bin, "prefill_tok_per_step")),
    ("batch", _rowwise(batch_bin, "batch")),
    ("layout", _rowwise(layout, "tp", "ep", "attention_dp")),
    ("parallel", _rowwise(parallel, "ep", "attention_dp")),
    ("backend", lambda df: df["framework"]),
    ("GPU", lambda df: df["gpu"]),
    ("precision", lambda df: df["precision"]),
    ("model", lambda df: df["arch"]),
)
_ORDER = {label: i for i, label in enumerate([*(lb for _, lb in LOAD_BINS),
                                              *(lb for _, _, lb in BUCKETS)])}


def _sort_key(label: str) -> str:
    """Bins in their own order (load, batch), the rest with numbers compared as numbers."""
    if label in _ORDER:
        return f"{_ORDER[label]:06d}"
    return "~" + re.sub(r"\d+", lambda m: m.group().zfill(6), label)


def verdict(n: int, median_abs: float) -> str:
    """meets / misses the target for a bin of n rows; n<50 bins are listed, not judged."""
    if n < MIN_N or math.isnan(median_abs):
        return f"n<{MIN_N}"
    return "meets" if median_abs <= TARGET else "misses"


def per_bin(df: pd.DataFrame, model: str = "kernels") -> pd.DataFrame:
    """One row per (dimension, bin): n, and for TPOT with the prefill share, the decode step
    alone and TTFT the median and worst |relative error| and the signed median, with each
    of TPOT's and TTFT's verdicts. Rows marked `overhead_fit` are left out."""
    if "overhead_fit" in df:
        df = df[~df["overhead_fit"].astype(bool)]
    out = []
    for dim, labels in DIMENSIONS:
        keys = labels(df) if len(df) else pd.Series(dtype=object)
        for label, g in df.groupby(keys, sort=False):
            rec: dict[str, object] = {"by": dim, "bin": str(label), "n": len(g)}
            for reading, suffix in READINGS:
                err = g[f"{model}{suffix}"].dropna()
                rec[f"{reading}_med"] = float(err.abs().median()) if len(err) else math.nan
                rec[f"{reading}_worst"] = float(err.abs().max()) if len(err) else math.nan
                rec[f"{reading}_signed"] = float(err.median()) if len(err) else math.nan
            rec["tpot_verdict"] = verdict(len(g), float(rec["tpot_med"]))  # type: ignore[arg-type]
            rec["ttft_verdict"] = verdict(len(g), float(rec["ttft_med"]))  # type: ignore[arg-type]
            out.append(rec)
    table = pd.DataFrame(out)
    if not len(table):
        return table
    dim_rank = {d: i for i, (d, _) in enumerate(DIMENSIONS)}
    table["_d"] = table["by"].map(dim_rank)
    table["_b"] = table["bin"].map(_sort_key)
    return table.sort_values(["_d", "_b"]).drop(columns=["_d", "_b"]).reset_index(
        drop=True)
