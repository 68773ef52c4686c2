"""Which silicon rows the per-step overhead is fitted on (the split `overhead` fits and
`prediction` keeps out of every judged bin), declared apart from both so that neither
imports the other."""

from __future__ import annotations

import pandas as pd

# Fit rows: at most this many prompt tokens per decode step (silicon's low-load bin, 0-40).
LOW = 40


def basis(df: pd.DataFrame) -> pd.DataFrame:
    """The rows the term is fitted and checked on: dense decoders in BF16 (every row where
    `df` has no `arch` / `precision` column). Left out, because their gap holds a kernel
    table's own error that a framework term must not absorb: MoE rows (+17 to +23 ms a step
    at vLLM TP1-2 on Qwen3-235B-A22B-FP8, H200) and FP8 rows (Llama-3.1-70B FP8 on B200:
    -3 to -9 ms at TP1, the kernels slower than the served engine)."""
    keep = pd.Series(True, index=df.index)
    if "arch" in df:
        keep &= df["arch"] == "dense"
    if "precision" in df:
        keep &= df["precision"] == "bf16"
    return df[keep]


def split(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(fit rows: `basis`, <= LOW prompt tokens per step; held out: the other `basis` rows)."""
    rows = basis(df)
    low = rows["prefill_tok_per_step"] <= LOW
    return rows[low], rows[~low]


def fit_mask(df: pd.DataFrame) -> pd.Series:
    """True at the rows the term is fitted on (`split`'s first part), False elsewhere."""
    return pd.Series(df.index.isin(split(df)[0].index), index=df.index)
