"""A profile's prompts as a process draws and keeps them: a block at a time
(`SimWorkload.draw_many`), kept for the process's next runs (`kept`).

Each prompt keeps its own random stream (seeded by (seed, workload, index): `streams.rng`)
and takes the same draws from it in the same order as one drawn alone: its difficulty and
prompt length (two normals), then per sample its length (a normal), its reward (a
uniform) and its check latency (a normal; a uniform and a normal more where the profile
has a slow tail). What a block shares is the rest: the streams' seeds are hashed together
(`streams.pcg64_states`), one generator is set to each stream in turn, and the arithmetic
that makes lengths, rewards and latencies of the draws runs once over the block's rows.
numpy's elementwise operations give each element the same double whichever array it is
in, so every prompt is bit for bit the prompt drawn alone (`tests/test_streams.py` checks
every profile). Measured on one idle core at K = 16: 40 -> 17 us a prompt.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from harness.core.runtime import Prompt
from workloads import streams

# Prompts this process drew: (profile, seed, K, index) -> prompt. A prompt is a pure
# function of its key and frozen, so a reproduction's runs share them.
KEPT: dict[tuple[str, int, int, int], Prompt] = {}
KEPT_MAX = 1 << 13  # about 32 MB at K = 16; a large run's prompts of one round fit
AHEAD = 64  # prompts a run's stream draws at once (`SimWorkload.prompt`)


def kept(key: tuple[str, int, int, int], draw: Callable[[int], Prompt],
         block: Callable[[list[int]], list[Prompt]] | None = None) -> Prompt:
    """The kept prompt of `key`, drawn the first time it is asked for: alone
    (`draw(index)`), or with `block` together with the next ones not kept (AHEAD of them
    at most, and half the keep). Past KEPT_MAX the oldest half goes."""
    found = KEPT.get(key)
    if found is not None:
        return found
    head, index = key[:3], key[3]
    if block is None:
        drawn = [draw(index)]
    else:
        ahead = max(1, min(AHEAD, KEPT_MAX // 2))
        drawn = block([i for i in range(index, index + ahead) if (*head, i) not in KEPT])
    if len(KEPT) + len(drawn) > KEPT_MAX:
        for old in list(KEPT)[: KEPT_MAX // 2]:
            del KEPT[old]
    for prompt in drawn:
        KEPT[(*head, prompt.index)] = prompt
    return drawn[0]


def draw_many(profile: Any, mu: float, entropy: tuple[int, int], k: int,
              indices: Sequence[int], samples: Callable[..., streams.Samples],
              hidden: Callable[..., Any]) -> list[Prompt]:
    """Prompts `indices` of a profile (`mu`: its log-median, `entropy`: (seed, stream), `k`
    samples each): as `SimWorkload.draw` draws each. `samples` draws one more sample of a
    prompt past its first K (`streams.Extra`); `hidden` makes a prompt's ground truth."""
    pr, n = profile, len(indices)
    seed, stream = entropy
    if not all(0 <= word < streams.WORD for word in (seed, stream, *indices)):
        raise ValueError("a prompt's entropy words must each fit 32 bits")
    tail = pr.tail_share > 0
    lengths_at, rewards_at, verify_at = 2, 2 + k, 2 + 2 * k
    raw = np.empty((n, 2 + (5 if tail else 3) * k))
    positioned = streams.Positioned()
    for row, (state, inc) in zip(raw, streams.pcg64_states(
            [np.full(n, seed, dtype=np.uint32), np.full(n, stream, dtype=np.uint32),
             np.array(indices, dtype=np.uint32)]), strict=True):
        rng = positioned.at(state, inc)
        rng.standard_normal(out=row[:rewards_at])  # z, the prompt's, then the lengths'
        rng.random(out=row[rewards_at:verify_at])
        rng.standard_normal(out=row[verify_at:verify_at + k])
        if tail:
            rng.random(out=row[verify_at + k:verify_at + 2 * k])
            rng.standard_normal(out=row[verify_at + 2 * k:])
    z = raw[:, 0]
    median = mu + pr.sigma_between * z
    lengths = np.exp(median[:, None] + pr.sigma_within * raw[:, lengths_at:rewards_at])
    lengths = np.maximum(np.rint(lengths), pr.min_tokens).astype(int)
    base = math.log(pr.pass_rate / (1 - pr.pass_rate))
    passes = np.array([1 / (1 + math.exp(-(base - pr.pass_slope * d))) for d in z.tolist()])
    rewards = (raw[:, rewards_at:verify_at] < passes[:, None]).astype(float)
    mu_v = math.log(pr.verify_mean_s) - pr.verify_sigma**2 / 2
    verify = np.exp(mu_v + pr.verify_sigma * raw[:, verify_at:verify_at + k])
    if tail:  # a slow tail, e.g. sandboxed code that runs long or hangs
        mu_t = math.log(pr.tail_mean_s) - pr.tail_sigma**2 / 2
        slow = raw[:, verify_at + k:verify_at + 2 * k] < pr.tail_share
        late = np.exp(mu_t + pr.tail_sigma * raw[:, verify_at + 2 * k:])
        verify = np.where(slow, late, verify)
        rewards = np.where(slow, 0.0, rewards)  # stragglers time out: no reward
    verify = np.rint(verify * 1e6) / 1e6  # np.round(verify, 6) as numpy computes it
    out = []
    for index, d, p, n_row, r_row, v_row in zip(
            indices, z, raw[:, 1].tolist(), lengths.tolist(), rewards.tolist(),
            verify.tolist(), strict=True):
        tokens = int(min(max(round(math.exp(pr.prompt_mu_log + pr.prompt_sigma_log * p)),
                             pr.prompt_min), pr.prompt_max))
        extra = streams.Extra(samples, (seed, stream, index), d)
        out.append(Prompt(index=index, tokens=tokens,
                          hidden=hidden(tuple(n_row), tuple(r_row), tuple(v_row),
                                        pr.verifier_kind, extra)))
    return out
