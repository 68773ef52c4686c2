"""APRIL's numbers and the claims made of the simulated runs.

Rollout throughput is the tokens generated in the round over its wall time
(`rollout_tokens_per_s`), averaged over the steady-state rounds. The paper defines
it so ("the total number of tokens generated on 8 GPUs divided by the wall-clock time
per rollout iteration", Sec. 3.2.1), and the authors' code computes it so:
`tokens_throughput = total_completion_tokens / rollout_time`
(RLsys-Foundation/APRIL@a72b585:slime/backends/megatron_utils/data.py:267-273), where
`total_completion_tokens` sums the `completion_tokens` of every generate call of the
round, aborted ones included, a resumed sample's new tokens only
(slime/rollout/sglang_example.py:100-104, 287-295), and `rollout_time` runs from the
round's start to the end of the abort (:240, :277, :285). The repository logs no
other throughput. The figure this harness used to headline (the tokens of the samples
a round returns, resumed prefixes included) is upstream slime's
`perf/tokens_per_gpu_per_sec` (THUDM/slime@fd31dc75, 2025-08-28), which the APRIL
fork does not have: no source ties Table 1 to it, so it is gone.

The carried-over share (~40%) has three readings, each reported: the repository's
`off_policy_ratio` (data.py:243-248; README.md:71, "the proportion of off-policy
tokens in one round is about 40%"), the text's share of the tokens trained on
(Sec. 3.2.3: "Tokens carried over from these truncated instances constitute
approximately 40% of the tokens in the subsequent steps"), and Figure 4's caption,
a share of rollouts ("approximately 40% of rollouts incorporate sequences generated
by preceding policy models"). The paper's numbers are never read while simulating.

No APRIL row holds by construction, so none is of kind "consistency": the GRPO
baselines are fitted as a mean only (each cell can miss), and the versions behind a
sample come from the carry-over the runs produce (a sample could span all 8 rounds).
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
GAIN = "APRIL throughput gain %"
MEAN_GAIN = "mean throughput gain %"
CARRIED = "carried-over share % (GRPO)"
# reading -> the steady figure it reads and the metric named in the table
CARRIED_READINGS = {"off_policy_ratio": ("off_policy_ratio", "off_policy_ratio"),
                    "trained tokens": ("carried", "offpolicy_token_frac"),
                    "trained samples": ("carried_samples", "carried_sample_frac")}


def gains(m: pd.DataFrame, algo: str, model: str, dataset: str) -> float:
    """APRIL's throughput gain over the baseline in %, tokens generated in the round."""
    base, april = (m.loc[(algo, model, dataset, method)] for method in ("baseline", "april"))
    return 100 * (april["throughput"] / base["throughput"] - 1)


def carried_shares(m: pd.DataFrame) -> dict[str, float]:
    """The GRPO APRIL runs' carried-over share in %, per reading (mean of six cells)."""
    grpo = m.xs("april", level="method").xs("grpo", level="algo")
    return {reading: 100 * float(grpo[column].mean())
            for reading, (column, _) in CARRIED_READINGS.items()}


def claims(df: pd.DataFrame) -> list[Claim]:
    m = steady(df)
    out: list[Claim] = []
    cell_gains = []
    for (algo, model), cells in TABLE1.items():
        for dataset, (base, april) in zip(DATASETS, cells, strict=True):
            cfg = f"{algo} {model} {dataset}"
            sim_base = m.loc[(algo, model, dataset, "baseline"), "throughput"]
            kind = "input" if algo == "grpo" else "input (not fitted)"
            out.append(Claim(PAPER, "baseline rollout throughput (tok/s)",
                             "rollout_tokens_per_s", cfg, base, base, sim_base, 0.10, kind))
            gain = gains(m, algo, model, dataset)
            cell_gains.append(gain)
            paper_gain = round(100 * (april / base - 1), 1)
            out.append(Claim(PAPER, GAIN, "rollout_tokens_per_s", cfg, paper_gain, paper_gain,
                             gain, 0.25))
    out.append(Claim(PAPER, MEAN_GAIN, "rollout_tokens_per_s", "12 cells", MEAN_GAIN_PCT,
                     MEAN_GAIN_PCT, sum(cell_gains) / len(cell_gains), 0.25))
    for reading, value in carried_shares(m).items():
        out.append(Claim(PAPER, CARRIED, CARRIED_READINGS[reading][1], "steady rounds",
                         CARRIED_SHARE_PCT, CARRIED_SHARE_PCT, value, 0.15, reading=reading))
    out.append(Claim(PAPER, "most policy versions behind one completed sample",
                     "versions_per_sample_max", "all APRIL runs", 1, MAX_VERSIONS,
                     m.xs("april", level="method")["versions"].max(), 0.0))
    return out


def gains_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per Table 1 cell: throughput (tokens generated in the round) and gain beside the
    paper's; APRIL's carried-over share under the three readings; for DAPO, the share of
    completed groups the filter dropped and the over-sampling batches per round."""
    m = steady(df)
    rows = []
    for (algo, model), cells in TABLE1.items():
        for dataset, (base, april) in zip(DATASETS, cells, strict=True):
            b, a = (m.loc[(algo, model, dataset, k)] for k in ("baseline", "april"))
            rows.append({"algo": algo, "model": model, "dataset": dataset,
                         "paper_baseline_tok_s": base, "paper_april_tok_s": april,
                         "paper_gain_pct": round(100 * (april / base - 1), 1),
                         "baseline_tok_s": b["throughput"], "april_tok_s": a["throughput"],
                         "gain_pct": gains(m, algo, model, dataset),
                         "off_policy_ratio_pct": 100 * a["off_policy_ratio"],
                         "carried_tokens_pct": 100 * a["carried"],
                         "carried_samples_pct": 100 * a["carried_samples"],
                         "baseline_zero_variance_pct": 100 * b["zero_variance"],
                         "april_zero_variance_pct": 100 * a["zero_variance"],
                         "baseline_batches": b["batches"], "april_batches": a["batches"]})
    return pd.DataFrame(rows)
