"""SkyRL's published numbers and the claims made of the acceptance model and the runs.

The input: the mean accepted length, 3.32 tokens a verification at k = 3
(NovaSky-AI/SkyRL@a9564572:docs/content/docs/examples/spec_decode.mdx:137), to which the
per-token acceptance alpha is fitted (`runs.ALPHA`, E = (1 - alpha^(k+1)) / (1 - alpha)).
The draft acceptance rate, 77.3% (:137), is vLLM's accepted / drafted = (E - 1) / k, the
same fact again: a consistency row. The per-depth rates (:137) are the i.i.d. model's
alpha^i: predictions of its shape, not of the mean it was fitted to.

The times are SkyRL's timers, a step's mean (:133-135): the baseline's are its own
observations, of kind "input (not fitted)" (nothing is fitted to them: the calibration
fits nothing, `harness/sim/calibration/skyrl-spec.toml`); the MTP run's times and the
speedups are predictions. Left out: the policy train time's change (57.3 -> 61.3 s, :135,
the MTP head's draft loss): the simulated trainer has no draft loss and trains the same
responses in both runs, so its ratio is 1 by construction and would test nothing (its
4.0 s are 1.6% of the published MTP step).
"""

from __future__ import annotations

import pandas as pd

from harness.sim.speculative import expected_tokens
from harness.studies.claims import Claim
from harness.studies.reproduce.skyrl_spec.runs import ALPHA, MEAN_ACCEPTED, PAPER, SCRIPT

# spec_decode.mdx:133-135: seconds a step, (baseline, MTP)
TIMES = {"rollout_s": (310.1, 152.4), "step_s": (400.7, 246.8), "train_s": (57.3, 61.3)}
ACCEPTANCE_PCT = 77.3  # :137, draft acceptance rate
DEPTH_PCT = (88.6, 77.0, 66.3)  # :137, acceptance at depth 1/2/3
TOL = 0.10
K = SCRIPT["spec_tokens"]
CONFIG = "Qwen3-8B for Qwen3.5-9B, 8xH100 TP 1 eager"
SPEC = f"MTP k={K} alpha={ALPHA}"
NAMES = {"rollout_s": "rollout (generate)", "step_s": "step", "train_s": "policy train"}


def acceptance_claims() -> list[Claim]:
    """The input and what the i.i.d. acceptance model makes of it (no run needed)."""
    mean = expected_tokens(ALPHA, K)
    out = [Claim(PAPER, f"mean accepted length at k={K} (alpha fitted to it)",
                 "draft_mean_acceptance_length", SPEC, MEAN_ACCEPTED, MEAN_ACCEPTED, mean,
                 TOL, kind="input"),
           Claim(PAPER, "draft acceptance rate % = (E - 1) / k", "draft_acceptance_rate",
                 SPEC, ACCEPTANCE_PCT, ACCEPTANCE_PCT, 100 * (mean - 1) / K, TOL,
                 kind="consistency")]
    for depth, pct in enumerate(DEPTH_PCT, start=1):
        out.append(Claim(PAPER, f"acceptance % at depth {depth} (i.i.d.: alpha^{depth})",
                         f"draft_acceptance_rate_pos_{depth}", SPEC, pct, pct,
                         100 * ALPHA ** depth, TOL))
    return out


def claims(sim: pd.DataFrame) -> list[Claim]:
    by = sim.set_index("run")
    base, mtp = by.loc["baseline"], by.loc["mtp"]
    out = acceptance_claims()
    for metric in ("rollout_s", "step_s"):
        paper_base, paper_mtp = TIMES[metric]
        name = NAMES[metric]
        out += [Claim(PAPER, f"baseline {name} s", metric, CONFIG, paper_base, paper_base,
                      base[metric], TOL, kind="input (not fitted)"),
                Claim(PAPER, f"MTP {name} s", metric, f"{CONFIG}, {SPEC}", paper_mtp,
                      paper_mtp, mtp[metric], TOL),
                Claim(PAPER, f"{name} speedup, baseline / MTP", metric, f"{CONFIG}, {SPEC}",
                      paper_base / paper_mtp, paper_base / paper_mtp,
                      base[metric] / mtp[metric], TOL)]
    out.append(Claim(PAPER, "baseline policy train s", "train_s", CONFIG, TIMES["train_s"][0],
                     TIMES["train_s"][0], base["train_s"], TOL, kind="input (not fitted)"))
    return out
