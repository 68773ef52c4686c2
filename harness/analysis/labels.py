"""Axis labels with units for the columns of result tables.

Why: `rolloutbench plot` takes any column of a sweep's or a reproduction's table,
and a raw column name (`rollout_to_train_end_s`) is not an axis label. Known
columns get a name a reader knows and their unit; an unknown one its name with
spaces and, where the suffix says so, its unit.
"""

from __future__ import annotations

LABELS = {
    # metrics per round (harness.metrics.KEYS, OFFPOLICY_KEYS)
    "rollout_to_train_end_s": "rollout-to-train-end (s)",
    "first_dispatch_s": "first dispatch (s)",
    "rollout_complete_s": "rollout completion (s)",
    "trainer_compute_s": "trainer compute (s)",
    "mean_response_tokens": "mean response length (tokens)",
    "rollout_tokens_per_s": "rollout throughput, tokens generated (tokens/s)",
    "batch_tokens_per_s": "rollout throughput, returned samples' lengths (tokens/s)",
    "waiting_ratio": "trainer waiting ratio (fraction of the round)",
    "start_wait_ratio": "trainer's wait before its first batch (fraction of the round)",
    "lower_bound_s": "critical-path lower bound (s)",
    "efficiency": "efficiency (lower bound / rollout-to-train-end)",
    "ess": "effective sample size (fraction of the batch)",
    "ess_clamped": "clamped effective sample size (fraction of the batch)",
    "lag_mean": "mean policy lag (optimizer steps)",
    "lag_max": "largest policy lag (optimizer steps)",
    "offpolicy_token_frac": "trained tokens from older policies (fraction)",
    "versions_per_sample_max": "most policy versions behind one sample",
    # run-config fields a sweep varies
    "groups": "R (groups per rollout)",
    "group_size": "K (samples per group)",
    "update_groups": "U (groups per optimizer update)",
    "frontier": "F_w (frontier width, groups)",
    "concurrency": "H (sequences in flight per engine)",
    "max_lag": "max lag (optimizer steps)",
    "over_sampling_groups": "groups in flight per round",
    "max_response_tokens": "response cap (tokens)",
    "round": "round",
    "seed": "seed",
}
SUFFIXES = {"_s": "s", "_tokens": "tokens", "_per_s": "/s", "_pct": "%", "_ms": "ms"}


def label(column: str) -> str:
    """The axis label of `column`: a known one's name and unit, else its name with
    spaces (and the unit its suffix names, e.g. `_s` for seconds)."""
    if column in LABELS:
        return LABELS[column]
    for suffix, unit in sorted(SUFFIXES.items(), key=lambda kv: -len(kv[0])):
        if column.endswith(suffix) and len(column) > len(suffix):
            return f"{column[: -len(suffix)].replace('_', ' ')} ({unit})"
    return column.replace("_", " ")


def short(column: str) -> str:
    """The label without its unit, for titles."""
    text = label(column)
    return text.split(" (")[0] if text.endswith(")") else text
