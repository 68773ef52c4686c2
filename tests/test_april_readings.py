"""APRIL's readings, checked on events and tables small enough to work out by hand.

- the repository's `off_policy_ratio` (RLsys-Foundation/APRIL@a72b585:slime/backends/
  megatron_utils/data.py:243-248): a resumed sample adds its *previous segment's*
  tokens (slime/rollout/sglang_example.py:80-83), and the denominator is the tokens
  generated in the round, aborted calls included (:100-104);
- Figure 4's share of trained samples that hold earlier-policy tokens;
- the DAPO filter's dropped share;
- throughput gains from tokens generated in the round, not from the samples returned;
- the setup the scripts run: TP 2 x 4 engines at mem fraction 0.6, the baselines
  without over-sampling.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from harness.studies.reproduce.april import claims, runs


def _events() -> list[dict[str, Any]]:
    """Three rounds of one carried sample and a few others (K = 2, tokens by hand).

    Round 0 (version 0): sample (1, 0) makes 100 tokens and is aborted; (1, 1) finishes
    with 50; group 2 finishes (40 + 40) and is trained. Round 1 (version 1): (1, 0) is
    resumed at 100 and aborted at 130 (30 new); group 3 finishes (60 + 20), and so does
    group 4 (10 + 10), which the filter drops. Round 2 (version 2): (1, 0) is resumed at
    130 and finishes at 150 (20 new); group 1 is trained.

    By hand: generated tokens 100 + 50 + 80 = 230, 30 + 80 + 20 = 130 and 20. Resumed
    samples add their previous segment: 0 in round 0, 100 in round 1, 30 (not 130) in
    round 2. off_policy_ratio: 0, 100 / 230 and 30 / 50."""
    e: list[dict[str, Any]] = [{"t": 0.0, "ev": "run_start", "system": "april",
                                "workload": "sci-jl"}]

    def submit(t: float, g: int, s: int, rnd: int, resumed: int = 0) -> None:
        e.append({"t": t, "ev": "request_submit", "group": g, "sample": s, "round": rnd,
                  "resumed_tokens": resumed})

    def finish(t: float, g: int, s: int, tokens: int, status: str,
               spans: list[list[int]]) -> None:
        e.append({"t": t, "ev": "request_finish", "group": g, "sample": s,
                  "response_tokens": tokens, "status": status,
                  "versions": [spans[0][0], spans[-1][0]], "version_spans": spans})

    def train(t: float, rnd: int, batch: int, groups: list[int]) -> None:
        e.append({"t": t, "ev": "rollout_complete", "round": rnd})
        e.append({"t": t, "ev": "batch_dispatch", "batch": batch, "groups": groups,
                  "round": rnd})
        e.append({"t": t, "ev": "train_start", "batch": batch})
        e.append({"t": t + 1, "ev": "train_end", "batch": batch})
        e.append({"t": t + 1, "ev": "optimizer_step", "step": batch + 1,
                  "version": batch + 1})

    e.append({"t": 0.0, "ev": "rollout_start", "round": 0, "version": 0})
    for g, s in ((1, 0), (1, 1), (2, 0), (2, 1)):
        submit(0.0, g, s, 0)
    finish(1.0, 1, 1, 50, "finished", [[0, 50]])
    finish(1.0, 2, 0, 40, "finished", [[0, 40]])
    finish(1.0, 2, 1, 40, "finished", [[0, 40]])
    e.append({"t": 1.0, "ev": "group_complete", "group": 2, "round": 0})
    finish(2.0, 1, 0, 100, "aborted", [[0, 100]])
    train(2.0, 0, 0, [2])

    e.append({"t": 4.0, "ev": "rollout_start", "round": 1, "version": 1})
    submit(4.0, 1, 0, 1, resumed=100)
    for g in (3, 4):
        submit(4.0, g, 0, 1)
        submit(4.0, g, 1, 1)
    finish(5.0, 3, 0, 60, "finished", [[1, 60]])
    finish(5.0, 3, 1, 20, "finished", [[1, 20]])
    e.append({"t": 5.0, "ev": "group_complete", "group": 3, "round": 1})
    finish(5.0, 4, 0, 10, "finished", [[1, 10]])
    finish(5.0, 4, 1, 10, "finished", [[1, 10]])
    e.append({"t": 5.0, "ev": "group_complete", "group": 4, "round": 1})
    e.append({"t": 5.0, "ev": "decision", "what": "drop_group", "group": 4})
    e.append({"t": 5.0, "ev": "decision", "what": "over_sample", "round": 1, "batch": 2,
              "groups": 2})
    finish(6.0, 1, 0, 130, "aborted", [[0, 100], [1, 30]])
    train(6.0, 1, 1, [3])

    e.append({"t": 8.0, "ev": "rollout_start", "round": 2, "version": 2})
    submit(8.0, 1, 0, 2, resumed=130)
    finish(9.0, 1, 0, 150, "finished", [[0, 100], [1, 30], [2, 20]])
    e.append({"t": 9.0, "ev": "group_complete", "group": 1, "round": 2})
    train(9.0, 2, 2, [1])
    e.append({"t": 10.0, "ev": "run_end"})
    return e


def test_off_policy_ratio_counts_the_previous_segment_only() -> None:
    rows = runs.round_rows(_events())
    assert [r["off_policy_ratio"] for r in rows] == [0.0, 100 / 230, 30 / 50]
    # the harness's own figure agrees on what was generated: 230 tokens in 2 s, ...
    assert [r["rollout_tokens_per_s"] for r in rows] == [230 / 2, 130 / 2, 20 / 1]


def test_trained_samples_and_tokens_from_older_policies() -> None:
    rows = runs.round_rows(_events())
    # round 2 trains group 1: (1, 0) holds tokens of versions 0 and 1, (1, 1) of 0
    assert [r["carried_sample_frac"] for r in rows] == [0.0, 0.0, 1.0]
    # trained tokens of round 2: 150 + 50, of which 100 + 30 + 50 are older than v2
    assert rows[2]["offpolicy_token_frac"] == 180 / 200


def test_dropped_share_and_sampling_batches() -> None:
    rows = runs.round_rows(_events())
    assert [r["zero_variance_frac"] for r in rows] == [0.0, 0.5, 0.0]
    assert [r["sampling_batches"] for r in rows] == [1, 2, 1]


def _table(base: float, april: float, batch: float) -> pd.DataFrame:
    """Every Table 1 cell, baseline and APRIL, three steady rounds of given figures;
    `batch_tokens_per_s` (the returned samples' tokens) set apart on purpose."""
    rows = []
    for algo, model in claims.TABLE1:
        for dataset in runs.DATASETS:
            for method, tok in (("baseline", base), ("april", april)):
                for rnd in range(runs.WARMUP, runs.WARMUP + 3):
                    rows.append({"algo": algo, "model": model, "workload": dataset,
                                 "method": method, "round": rnd, "rollout_tokens_per_s": tok,
                                 "batch_tokens_per_s": batch, "off_policy_ratio": 0.38,
                                 "offpolicy_token_frac": 0.7, "carried_sample_frac": 0.5,
                                 "zero_variance_frac": 0.0, "sampling_batches": 1,
                                 "versions_per_sample_max": 3})
    return pd.DataFrame(rows)


def test_gains_are_tokens_generated_in_the_round() -> None:
    rows = claims.claims(_table(base=100.0, april=125.0, batch=999.0))
    gain = [c for c in rows if c.claim == claims.GAIN]
    assert len(gain) == 12 and all(math.isclose(c.harness, 25.0) for c in gain)
    assert all(c.metric == "rollout_tokens_per_s" and c.reading == "" for c in gain)
    (mean,) = [c for c in rows if c.claim == claims.MEAN_GAIN]
    assert math.isclose(mean.harness, 25.0) and mean.within  # 22.5 +- 25%: 16.9 to 28.1
    assert not any(c.metric == "batch_tokens_per_s" for c in rows)


def test_carried_share_has_three_readings() -> None:
    rows = [c for c in claims.claims(_table(100.0, 125.0, 1.0)) if c.claim == claims.CARRIED]
    got = {c.reading: (c.metric, round(c.harness, 6), c.within) for c in rows}
    assert got == {"off_policy_ratio": ("off_policy_ratio", 38.0, True),
                   "trained tokens": ("offpolicy_token_frac", 70.0, False),
                   "trained samples": ("carried_sample_frac", 50.0, False)}  # 40 +- 6


def test_setup_is_the_scripts() -> None:
    base = runs.config("dapo", "qwen3-4b", "dapo-math-17k", False, 0, 2)
    april = runs.config("dapo", "qwen3-8b", "deepmath-103k", True, 0, 2)
    for cfg in (base, april):
        s = cfg.sim
        assert (s.rollout_tp, s.rollout_engines, s.mem_fraction) == (2, 4, 0.6)
        assert s.rollout_tp * s.rollout_engines == 8 and s.placement == "colocated"
    assert (base.over_sampling_groups, base.partial_rollout, base.dynamic_sampling) == (
        0, False, True)
    assert (april.over_sampling_groups, april.partial_rollout) == (64, True)
