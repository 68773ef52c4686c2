"""The claims made of AReaL's two figures (numbers and citations: `readings`).

Each published value carries its reading error (`readings.error`) as its range, and the
claim its tolerance beside it (TOL, a fraction of each bound, as the other papers').
Kinds, per the calibration rule (`fit`):
- input: the rows a fit saw (verl's smallest-GPU rows, fit.FIT_ROWS; Fig. 7's
  staleness 0, fit.STALENESS_FIT);
- prediction: everything else: verl's other rows (its scaling, from the fitted trainer scale),
  every AReaL row, AReaL over verl, the other staleness bars, Table 2's speedup.
"""

from __future__ import annotations

import pandas as pd

from harness.studies.claims import Claim
from harness.studies.reproduce.areal import fit, readings
from harness.studies.reproduce.areal.runs import NO_VERL, PANELS, PAPER, eta_label, label

TOL = 0.10


def published(model: str, ctx: int, system: str, gpus: int) -> tuple[float, float, float]:
    """(value, low, high) of one figure value, tokens/s, its range the reading error."""
    value = readings.scaling(model, ctx, system)[gpus]
    err = readings.error(model, ctx, system, gpus)
    return value, value * (1 - err), value * (1 + err)


def scaling_claims(sim: pd.DataFrame) -> list[Claim]:
    """Each point of the scaling figure, and AReaL over verl, per reading of verl's config."""
    out: list[Claim] = []
    for reading, rows in sim.groupby("reading", sort=False):
        by = rows.set_index("label")["throughput"]
        for (model, ctx), sizes in PANELS.items():
            for n in sizes:
                config = f"{model} {ctx // 1024}k, {n} H800 (scaling_trend_vs_verl.png)"
                systems = ("areal",) if (model, ctx) in NO_VERL else ("verl", "areal")
                for system in systems:
                    _, lo, hi = published(model, ctx, system, n)
                    kind = ("input" if system == "verl" and (model, ctx, n) in fit.FIT_ROWS
                            else "prediction")
                    out.append(Claim(PAPER, f"{system} effective throughput (tokens/s)",
                                     "throughput", config, lo, hi,
                                     by[label(system, model, ctx, n)], TOL, kind=kind,
                                     reading=str(reading)))
                if (model, ctx) in NO_VERL:
                    continue
                a, _, _ = published(model, ctx, "areal", n)
                v, _, _ = published(model, ctx, "verl", n)
                err = (readings.error(model, ctx, "areal", n)
                       + readings.error(model, ctx, "verl", n))
                got = by[label("areal", model, ctx, n)] / by[label("verl", model, ctx, n)]
                out.append(Claim(PAPER, "AReaL over verl (x)", "speedup", config,
                                 a / v * (1 - err), a / v * (1 + err), got, TOL,
                                 reading=str(reading)))
    return out


def staleness_claims(sim: pd.DataFrame) -> list[Claim]:
    """Fig. 7's bars (one reading: its GPUs, `readings`) and Table 2's speedup."""
    by = sim.set_index("eta")["throughput"]
    out = []
    for eta, value in readings.STALENESS.items():
        k = value * 1000
        kind = "input" if eta == fit.STALENESS_FIT else "prediction"
        # a bar's printed value is rounded to 0.1k: its range is +-0.05k
        out.append(Claim(PAPER, "effective throughput at max staleness (tokens/s)",
                         "throughput", f"1.5B 8k, 128 H800, staleness {eta_label(eta)} "
                         "(Fig. 7)", k - 50, k + 50, by[eta_label(eta)], TOL, kind=kind))
    gain = readings.TABLE2_SYNC_H / readings.TABLE2_ASYNC_H
    out.append(Claim(PAPER, "asynchronous over synchronous, 1,000 steps (x)", "speedup",
                     "1.5B, 16 nodes, staleness 4 (blog Table 2)", gain, gain,
                     by["4"] / by["0"], TOL))
    values = [by[eta_label(e)] for e in readings.STALENESS]
    rising = all(b >= a * (1 - 1e-9) for a, b in zip(values, values[1:], strict=False))
    out.append(Claim(PAPER, "throughput never falls as staleness grows (1 = holds)",
                     "throughput", "1.5B 8k, staleness 0 to unbounded (Fig. 7)", 1.0, 1.0,
                     float(rising), 0.0))
    return out

