"""APRIL's numbers and the claims made of the simulated runs.

Rollout throughput is what slime logs and the paper reports: the response
lengths of the samples a rollout returns for training (resumed prefixes
included) over its wall time (`batch_tokens_per_s`), averaged over the
steady-state rounds. The paper's text defines it as the tokens *generated* in
the rollout iteration over its wall time (`rollout_tokens_per_s`: resumed
prefixes were generated in earlier rounds and do not count; aborted and
discarded work does); the gain under that definition is a second row per cell.
The paper's numbers are never read while simulating.
"""

from __future__ import annotations

import pandas as pd

from harness.studies.claims import Claim
from harness.studies.reproduce.april.runs import DATASETS, PAPER, steady

# Table 1: rollout throughput (tokens/s on 8 GPUs), (baseline, APRIL).
TABLE1 = {
    ("grpo", "qwen3-4b"): ((9814, 12210), (9252, 12183), (9459, 13027)),
    ("grpo", "qwen3-8b"): ((8780, 11096), (8031, 10821), (7756, 11594)),
    ("dapo", "qwen3-4b"): ((12572, 13698), (12257, 13916), (13038, 14318)),
    ("dapo", "qwen3-8b"): ((11419, 12407), (11470, 12439), (11860, 13075)),
}
MEAN_GAIN_PCT = 22.5
CARRIED_SHARE_PCT = 40.0
MAX_VERSIONS = 5
GENERATED = " (tokens generated in the round)"  # the claims under the paper's text definition


def gains(m: pd.DataFrame, algo: str, model: str, dataset: str) -> tuple[float, float]:
    """APRIL's throughput gain over the baseline in %, as slime logs throughput
    (returned samples' tokens) and as the paper's text defines it (generated tokens)."""
    base, april = (m.loc[(algo, model, dataset, method)] for method in ("baseline", "april"))
    return (100 * (april["throughput"] / base["throughput"] - 1),
            100 * (april["generated"] / base["generated"] - 1))


def claims(df: pd.DataFrame) -> list[Claim]:
    m = steady(df)
    out: list[Claim] = []
    logged, generated = [], []
    for (algo, model), cells in TABLE1.items():
        for dataset, (base, april) in zip(DATASETS, cells, strict=True):
            cfg = f"{algo} {model} {dataset}"
            sim_base = m.loc[(algo, model, dataset, "baseline"), "throughput"]
            kind = "input" if algo == "grpo" else "input (not fitted)"
            out.append(Claim(PAPER, "baseline rollout throughput (tok/s)", "batch_tokens_per_s",
                             cfg, base, base, sim_base, 0.10, kind))
            gain, gain_b = gains(m, algo, model, dataset)
            logged.append(gain)
            generated.append(gain_b)
            paper_gain = round(100 * (april / base - 1), 1)
            out.append(Claim(PAPER, "APRIL throughput gain %", "batch_tokens_per_s", cfg,
                             paper_gain, paper_gain, gain, 0.25))
            out.append(Claim(PAPER, "APRIL throughput gain %" + GENERATED,
                             "rollout_tokens_per_s", cfg, paper_gain, paper_gain, gain_b, 0.25))
    out.append(Claim(PAPER, "mean throughput gain %", "batch_tokens_per_s", "12 cells",
                     MEAN_GAIN_PCT, MEAN_GAIN_PCT, sum(logged) / len(logged), 0.25))
    out.append(Claim(PAPER, "mean throughput gain %" + GENERATED, "rollout_tokens_per_s",
                     "12 cells", MEAN_GAIN_PCT, MEAN_GAIN_PCT,
                     sum(generated) / len(generated), 0.25))
    grpo = m.xs("april", level="method").xs("grpo", level="algo")
    out.append(Claim(PAPER, "carried-over token share % (GRPO)", "offpolicy_token_frac",
                     "steady rounds", CARRIED_SHARE_PCT, CARRIED_SHARE_PCT,
                     100 * grpo["carried"].mean(), 0.15))
    out.append(Claim(PAPER, "most policy versions behind one completed sample",
                     "versions_per_sample_max", "all APRIL runs", 1, MAX_VERSIONS,
                     m.xs("april", level="method")["versions"].max(), 0.0))
    return out


def gains_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per Table 1 cell: throughput and gain under both definitions, beside the paper's.

    `logged` is slime's figure (tokens of the samples a rollout returns, resumed
    prefixes included); `generated` is the paper's text (tokens generated in the
    round, aborted and discarded work included, resumed prefixes not again);
    `carried_pct` is the share of APRIL's trained tokens generated in earlier rounds."""
    m = steady(df)
    rows = []
    for (algo, model), cells in TABLE1.items():
        for dataset, (base, april) in zip(DATASETS, cells, strict=True):
            b, a = (m.loc[(algo, model, dataset, k)] for k in ("baseline", "april"))
            gain, gain_b = gains(m, algo, model, dataset)
            rows.append({"algo": algo, "model": model, "dataset": dataset,
                         "paper_gain_pct": round(100 * (april / base - 1), 1),
                         "logged_baseline_tok_s": b["throughput"],
                         "logged_april_tok_s": a["throughput"], "logged_gain_pct": gain,
                         "generated_baseline_tok_s": b["generated"],
                         "generated_april_tok_s": a["generated"], "generated_gain_pct": gain_b,
                         "carried_pct": 100 * a["carried"]})
    return pd.DataFrame(rows)
