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
from collections.abc import Callable, Iterator, Sequence
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
    samples each), each from its own stream: its difficulty z and prompt length (two
    normals), then its K samples' draws (`fill`). Several streams are seeded together
    where every word fits 32 bits (`streams.pcg64_states`), one alone by numpy
    (`streams.rng`). `samples` draws one more sample of a prompt past its first K
    (`streams.Extra`); `hidden` makes a prompt's ground truth."""
    pr, n, tail = profile, len(indices), profile.tail_share > 0
    seed, stream = entropy
    raw = np.empty((n, 2 + (5 if tail else 3) * k))
    for row, rng in zip(raw, _streams(seed, stream, indices), strict=True):
        fill(rng, row, k, tail)
    z = raw[:, 0]
    lengths, rewards, verify = outcomes(pr, mu, z, raw[:, 2:], k)
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


def _streams(seed: int, stream: int, indices: Sequence[int]) -> Iterator[np.random.Generator]:
    """Each prompt's generator at the start of its stream, in order."""
    if len(indices) == 1 or not all(0 <= w < streams.WORD for w in (seed, stream, *indices)):
        for index in indices:
            yield streams.rng(seed, stream, index)
        return
    positioned = streams.Positioned()
    n = len(indices)
    for state, inc in streams.pcg64_states([np.full(n, seed, dtype=np.uint32),
                                            np.full(n, stream, dtype=np.uint32),
                                            np.array(indices, dtype=np.uint32)]):
        yield positioned.at(state, inc)


def fill(rng: np.random.Generator, row: np.ndarray, k: int, tail: bool) -> None:
    """`row` filled with a stream's draws in their order: normals up to the end of the k
    lengths' (a prompt's own two first), then the rewards' k uniforms, the latencies' k
    normals, and with a slow tail its k uniforms and k normals."""
    at = len(row) - (4 if tail else 2) * k  # where the rewards' uniforms start
    rng.standard_normal(out=row[:at])
    rng.random(out=row[at:at + k])
    rng.standard_normal(out=row[at + k:at + 2 * k])
    if tail:
        rng.random(out=row[at + 2 * k:at + 3 * k])
        rng.standard_normal(out=row[at + 3 * k:])


def outcomes(pr: Any, mu: float, z: np.ndarray, raw: np.ndarray, k: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lengths, rewards and check latencies (rows of k) of prompts of difficulty `z` from
    their samples' draws (`raw`: rows as `fill` lays them out past a prompt's two)."""
    lengths = np.exp((mu + pr.sigma_between * z)[:, None] + pr.sigma_within * raw[:, :k])
    lengths = np.maximum(np.rint(lengths), pr.min_tokens).astype(int)
    base = math.log(pr.pass_rate / (1 - pr.pass_rate))
    passes = np.array([1 / (1 + math.exp(-(base - pr.pass_slope * d))) for d in z.tolist()])
    rewards = (raw[:, k:2 * k] < passes[:, None]).astype(float)
    mu_v = math.log(pr.verify_mean_s) - pr.verify_sigma**2 / 2
    verify = np.exp(mu_v + pr.verify_sigma * raw[:, 2 * k:3 * k])
    if pr.tail_share > 0:  # a slow tail, e.g. sandboxed code that runs long or hangs
        mu_t = math.log(pr.tail_mean_s) - pr.tail_sigma**2 / 2
        slow = raw[:, 3 * k:4 * k] < pr.tail_share
        late = np.exp(mu_t + pr.tail_sigma * raw[:, 4 * k:])
        verify = np.where(slow, late, verify)
        rewards = np.where(slow, 0.0, rewards)  # stragglers time out: no reward
    return lengths, rewards, np.rint(verify * 1e6) / 1e6  # np.round(verify, 6), as numpy
