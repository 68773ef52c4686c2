"""GRPO group statistics (RolloutPipe Eq. 1), shared by both runtimes."""

from __future__ import annotations

import math
from collections.abc import Sequence

EPS_STD = 1e-6


def advantages(rewards: Sequence[float], eps: float = EPS_STD) -> list[float]:
    """A_i = (r_i - mean) / (std + eps) over the K rewards of one group.

    The population standard deviation is used, so a group whose rewards are all
    equal gets zero advantages (it carries no learning signal).
    """
    k = len(rewards)
    if k == 0:
        return []
    mean = sum(rewards) / k
    std = math.sqrt(sum([(r - mean) ** 2 for r in rewards]) / k)  # a list: no generator
    scale = std + eps
    return [(r - mean) / scale for r in rewards]
