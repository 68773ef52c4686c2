"""The readers: one per source of external GPU measurements, each marking its fitted rows.

Every reader returns `rows.frame` rows. What a reader counts as fitted is what the project's
own fit saw, named where that fit is declared (so a change of the fit's split shows here):

- silicon: aiconfigurator-core's measured serving TPOT and TTFT against the kernels step
  model; TPOT rows in the per-step overhead's fit split (`overhead.split`) are fitted; TTFT
  is never fitted. TTFT twice: the wave formula, and the closed-loop replay of the
  benchmark through the simulated engine (with the replay's TPOT beside it).
- the reproductions of published GPU runs (verl's fully-async READMEs, AReaL's benchmark):
  their rows of the claims table, one source per reading; `input` rows are the calibration's
  fit, every other kind (`input (not fitted)`, `prediction`, `consistency`) is held out.
- weight sync: published synchronisation times against the transfer model; its declared fit
  rows are fitted.
- the trainer: the kernel-priced trainer against prime-rl's published benchmarks and the
  project's Megatron runs, with the split `trainer_bench` declares.
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
    df.loc[df["quantity"] == "TTFT", "source"] = "silicon TTFT (wave)"
    df.loc[df["quantity"] == "TPOT", "source"] = "silicon TPOT"
    return df


def silicon_closed_loop(table: pd.DataFrame) -> pd.DataFrame:
    """TTFT and TPOT from the closed-loop replay of the silicon benchmark through the
    simulated engine (`closed_loop.replayed`); nothing in it is fitted."""
    from harness.studies.validate.gpu.silicon import closed_loop

    res = closed_loop.replayed(table)
    recs = []
    for r in res.itertuples(index=False):
        recs.append({"case": str(r.id), "quantity": "TTFT", "unit": "ms",
                     "measured": r.measured_ttft_ms, "predicted": r.closed_ttft_ms,
                     "fitted": False})
        recs.append({"case": str(r.id), "quantity": "TPOT", "unit": "ms",
                     "measured": r.measured_ms, "predicted": r.closed_tpot_ms,
                     "fitted": False})
    df = frame(recs, "silicon replay", SILICON_REF)
    df["source"] = "silicon " + df["quantity"] + " (closed-loop replay)"
    return df


# A reading's qualifiers that choose rows of one reading, not another reading: a window of
# steps, or a run's own script setting (verl's READMEs).
ROW_QUALIFIERS = ("300 steps", "first 100 steps", "staleness ")


def base_reading(reading: str) -> str:
    """A claim's reading less the qualifiers that pick its window or script setting, so that
    one source is one reading of the calibration ("lengths from gen, first 100 steps" ->
    "lengths from gen")."""
    return ", ".join(p for p in reading.split(", ") if not p.startswith(ROW_QUALIFIERS))


def reproductions(claims_csv: Path, papers: tuple[str, ...] = GPU_RUN_PAPERS) -> pd.DataFrame:
    """The claims table's rows of `papers`: the published value (the middle of a range) against
    the harness's, a source per paper and reading."""
    claims = pd.read_csv(claims_csv)
    parts = []
    kept = claims[claims["paper"].isin(papers)]
    for (paper, reading), g in kept.groupby(
            ["paper", kept["reading"].fillna("").map(base_reading)], sort=False):
        recs = [{"case": f"{r.config}: {r.claim}", "quantity": r.metric, "unit": "",
                 "measured": (r.paper_low + r.paper_high) / 2, "predicted": r.harness,
                 "fitted": r.kind == "input"} for r in g.itertuples(index=False)]
        name = f"{paper} ({reading})" if reading else str(paper)
        parts.append(frame(recs, name, f"{claims_csv} (make reproduce)"))
    return pd.concat(parts, ignore_index=True) if parts else frame([], "none", "")


def weight_sync() -> pd.DataFrame:
    """Published sync times (measurements/published/weight_sync.csv) against the transfer
    model with its committed constants; the declared fit rows (`weight_sync_fit.FIT_ROWS`)
    are fitted, the other scored rows held out."""
    from harness.sim.weight_sync import FITTED
    from harness.studies.validate import weight_sync_fit as wf

    fit, held, _ = wf.split(wf.read())
    recs = [{"case": f"{e['id']}: {e['model']} ({e['path']}, {e['gpus']} {e['gpu']})",
             "quantity": "sync", "unit": "s", "measured": e["measured_s"],
             "predicted": e["predicted_s"], "fitted": fitted}
            for rows, fitted in ((fit, True), (held, False))
            for e in wf.errors(rows, FITTED)]
    return frame(recs, "weight sync", str(wf.DATA))


def trainer() -> pd.DataFrame:
    """The kernel-priced trainer (`sim.train_model=kernels`) against prime-rl's published
    trainer benchmarks and the project's Megatron runs on an H100; each row's `fit` column is
    the split `trainer_bench` declares."""
    from harness.studies.validate.gpu import trainer_bench as tb

    prime, megatron = tb.errors()
    parts = []
    prime = prime[prime["why_not"] == ""]
    recs = [{"case": f"{r.model} {r.kind} {r.seq_len} on {r.gpus} {r.hardware}",
             "quantity": "micro-batch", "unit": "s", "measured": r.measured_s,
             "predicted": r.predicted_s, "fitted": bool(r.fit)}
            for r in prime.itertuples(index=False)]
    parts.append(frame(recs, "trainer: prime-rl", str(tb.CSV)))
    recs = [{"case": f"{r.model} {r.kind} b{r.batch} s{r.seq}", "quantity": r.kind,
             "unit": "s", "measured": r.measured_s, "predicted": r.predicted_s,
             "fitted": bool(r.fit)} for r in megatron.itertuples(index=False)]
    parts.append(frame(recs, "trainer: Megatron H100", "measurements/h100-sxm/trainer"))
    return pd.concat(parts, ignore_index=True)
