"""The silicon comparison as text: per-bin tables first (the headline), then the step
models by batch, then the per-step time left unexplained where prompts add little."""

from __future__ import annotations

import math
import textwrap

import pandas as pd

from harness.studies.validate.gpu.silicon.bins import BUCKETS, MIN_N, MODELS, TARGET, per_bin
from harness.studies.validate.gpu.silicon.closed_loop import section as closed_loop_section

LOW_PROMPT_TOK = 40  # rows with at most this many prompt tokens per step: little prefill


def _pct(x: float, signed: bool = False) -> str:
    if math.isnan(x):
        return "-"
    digits = 0 if abs(x) >= 1 else 1  # 1994 rather than 1994.4: the tables fit 100 columns
    return f"{100 * x:+.{digits}f}" if signed else f"{100 * x:.{digits}f}"


def _three(r: pd.Series, reading: str) -> str:
    return (f"{_pct(r[f'{reading}_med'])} / {_pct(r[f'{reading}_worst'])} / "
            f"{_pct(r[f'{reading}_signed'], True)}")


def bin_tables(df: pd.DataFrame, model: str = "kernels") -> str:
    """The headline (bins of >= MIN_N rows against the target) and every bin in full."""
    table = per_bin(df, model)
    if not len(table):
        return "No rows to bin."
    judged = table[table["n"] >= MIN_N]
    fitted = int(df["overhead_fit"].sum()) if "overhead_fit" in df else 0
    lines = [textwrap.fill(
        f"{model} step model per bin: median |relative error| against the target "
        f"(<= {TARGET:.0%}) in every bin of >= {MIN_N} rows. TPOT with the prefill share; "
        "TTFT of a wave of `batch` prompts. Load: prompt tokens prefilled per decode step "
        f"(batch * isl / osl). The {fitted} rows the per-step overhead was fitted on "
        "(overhead.md) are in no bin; `parallel` pools the EP and attention-DP layouts.", 100),
             "", "| by | bin | n | TPOT med | TPOT | TTFT med | TTFT |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r.by} | {r.bin} | {r.n} | {_pct(r.tpot_med)}% | {r.tpot_verdict} | "
              f"{_pct(r.ttft_med)}% | {r.ttft_verdict} |" for r in judged.itertuples()]
    met = [(judged[f"{k}_verdict"] == "meets").sum() for k in ("tpot", "ttft")]
    lines += ["", f"Bins of >= {MIN_N} rows meeting the target: TPOT {met[0]} of {len(judged)},"
              f" TTFT {met[1]} of {len(judged)}.", "",
              "Every bin, |relative error| in %: median / worst / signed median "
              "(< 0: simulated too fast):", "",
              "| by | bin | n | TPOT (+ prefill share) | decode step alone | TTFT |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {r['by']} | {r['bin']} | {r['n']} | {_three(r, 'tpot')} | "
              f"{_three(r, 'decode')} | {_three(r, 'ttft')} |" for _, r in table.iterrows()]
    return "\n".join(lines)


def _header(df: pd.DataFrame) -> list[str]:
    basis = df["precision_basis"].value_counts().to_dict()
    kinds = ", ".join(f"{a} {p}: {n}" for (a, p), n in
                      df.groupby(["arch", "precision"]).size().items())
    lines = [textwrap.fill(f"Silicon sample: {len(df)} rows used (precision labelled: "
                           f"{basis.get('labelled', 0)}, inferred from an unlabelled "
                           f"checkpoint: {basis.get('inferred', 0)}; {kinds or 'none'}).", 100)]
    if "wall_s" in df.attrs:
        lines.append(f"Priced in {df.attrs['wall_s']:.1f} s ({df.attrs.get('engines', 0)} "
                     "engine x step-model pairs).")
    skipped = df.attrs.get("skipped", {})
    lines.append(f"Skipped {sum(skipped.values())} rows:")
    lines += [textwrap.fill(f"- {why}: {n}", 100, subsequent_indent="  ",
                            break_on_hyphens=False)
              for why, n in skipped.items()]
    if len(df) < 20:
        lines.append(f"\nToo few rows ({len(df)} < 20) for a reliable error estimate.")
    return lines


def _by_batch(df: pd.DataFrame) -> list[str]:
    groups = [(label, df[df["batch"].between(lo, hi)]) for lo, hi, label in BUCKETS]
    lines: list[str] = []
    for name in MODELS:
        lines += ["", f"{name} step model, |relative error| (signed median with the prefill "
                  "share: < 0 = too fast):",
                  "| batch | n | decode med | decode worst | +prefill med | +prefill worst "
                  "| +prefill signed med |", "|---|---|---|---|---|---|---|"]
        for label, g in [*groups, ("all", df)]:
            if len(g):
                d, t = g[f"{name}_err"].abs(), g[f"{name}_tpot_err"]
                lines.append(f"| {label} | {len(g)} | {d.median():.1%} | {d.max():.1%} | "
                             f"{t.abs().median():.1%} | {t.abs().max():.1%} | "
                             f"{t.median():+.1%} |")
    return lines


def summary(df: pd.DataFrame) -> str:
    """Rows used and skipped, the per-bin tables, |relative error| of both models by batch
    bucket, the per-step time left unexplained where prompts add little, and TTFT and TPOT
    from a closed-loop replay of the benchmark (closed_loop.py) beside the formulas'."""
    lines = [*_header(df), "", bin_tables(df), *_by_batch(df)]
    if not len(df):
        return "\n".join(lines)
    prose = [f"{name} (pooled, for comparison only): median |error| "
             f"{df[f'{name}_err'].abs().median():.1%} for the decode "
             f"step alone ({df[f'{name}_err'].median():+.1%} signed), "
             f"{df[f'{name}_tpot_err'].abs().median():.1%} with the prefill share "
             f"({df[f'{name}_tpot_err'].median():+.1%} signed)." for name in MODELS]
    low = df[df["prefill_tok_per_step"] <= LOW_PROMPT_TOK]
    gap = (low["measured_ms"] - low["kernels_tpot_ms"]).groupby(low["framework"]).agg(
        ["median", "size"])
    prose.append(f"Per-step overhead the kernels model leaves out, median (measured - kernels "
                 f"TPOT) over rows with <= {LOW_PROMPT_TOK} prompt tokens per step: "
                 + (", ".join(f"{fw} {g['median']:+.2f} ms (n={g['size']:.0f})"
                              for fw, g in gap.iterrows()) or "no such rows") + ".")
    return "\n".join([*lines, "", *(textwrap.fill(p, 100) for p in prose), "",
                      *closed_loop_section(df)])
