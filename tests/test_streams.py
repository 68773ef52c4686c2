"""A prompt's random streams (workloads/streams.py): the same numbers as numpy's
`default_rng` of the same entropy, and samples past K drawn from their own stream once."""

from __future__ import annotations

import numpy as np

from workloads import streams
from workloads.profile import make_workload


def test_rng_is_default_rng_of_the_same_entropy() -> None:
    # words below 2**32 (handed over as a uint32 array), the last word, and ints of
    # two and three words (the SeedSequence's own conversion)
    for entropy in [(0, 1, 2), (7, 4_000_000_000, 12345), (3, 9, 5, 1), (2**32 - 1, 0, 4),
                    (2**32, 5, 6), (2**70 + 3, 1, 2)]:
        ours, theirs = streams.rng(*entropy), np.random.default_rng(list(entropy))
        assert ours.standard_normal(5).tolist() == theirs.standard_normal(5).tolist()
        assert ours.random(3).tolist() == theirs.random(3).tolist()


def test_a_sample_past_k_is_drawn_from_its_own_stream_once() -> None:
    w = make_workload("lsat-ar", 3, 4)
    prompt = w.draw(11)
    calls: list[int] = []
    z = float(np.random.default_rng([3, w._stream, 11]).standard_normal(2)[0])  # noqa: SLF001

    def samples(rng: np.random.Generator, z: float, k: int) -> streams.Samples:
        calls.append(k)
        return w._samples(rng, z, k)  # noqa: SLF001

    extra = streams.Extra(samples, (3, w._stream, 11), z)  # noqa: SLF001
    # by hand: sample K + 2 of prompt 11 is the one sample drawn from (seed, stream, 11, 6)
    lengths, rewards, verify = w._samples(  # noqa: SLF001
        np.random.default_rng([3, w._stream, 11, 6]), z, 1)  # noqa: SLF001
    assert extra(6) == (lengths[0], rewards[0], verify[0]) == prompt.hidden.sample(6)
    assert extra(6) == extra(6) and calls == [1]  # drawn once, then kept
    assert prompt.hidden.sample(1) == prompt.hidden.drawn[1]  # the first K untouched
