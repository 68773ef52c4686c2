"""Prompt lengths measured from a dataset's problems: the statistics a workload
profile's `[prompt]` table holds, for the shipped sets (`python -m workloads.measure`)
and for a dataset of one's own (workloads.own_jsonl) alike, by the same code.

Each problem's text is counted with `approx_tokens` plus the fixed chat-template
overhead, and the lognormal is fitted by the mean and std of the natural log.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workloads.problem import Problem
from workloads.tokens import TEMPLATE_OVERHEAD_TOKENS, approx_tokens

METHOD = f"approx_tokens + template overhead {TEMPLATE_OVERHEAD_TOKENS}"


@dataclass(frozen=True, slots=True)
class PromptStats:
    """Summary of one workload's prompt lengths, in tokens (std is population)."""

    count: int
    mean: float
    std: float
    min: int
    p50: float
    p90: float
    max: int
    mu_log: float
    sigma_log: float


def prompt_tokens(problems: list[Problem]) -> np.ndarray:
    """Estimated prompt tokens of each problem, chat template included."""
    return np.array([approx_tokens(p.text) + TEMPLATE_OVERHEAD_TOKENS for p in problems])


def summarize(tokens: np.ndarray) -> PromptStats:
    """The statistics a profile needs, with the lognormal fitted by moments of log."""
    if tokens.size == 0:
        raise ValueError("no prompts to summarize")
    logs = np.log(tokens)
    return PromptStats(
        count=int(tokens.size),
        mean=float(tokens.mean()),
        std=float(tokens.std()),
        min=int(tokens.min()),
        p50=float(np.percentile(tokens, 50)),
        p90=float(np.percentile(tokens, 90)),
        max=int(tokens.max()),
        mu_log=float(logs.mean()),
        sigma_log=float(logs.std()),
    )
