"""A prompt's random streams: how each is seeded, and its samples past the first K.

Why a module of its own: a prompt is drawn once a process (`profile._kept`), but for each
of a run's prompts; seeding its stream and the object that would draw more samples cost
as much as its draws (a `default_rng` and a `functools.cache` closure: about 30 us of a
prompt's 70), so both are made here as cheaply as numpy allows, with the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Samples = tuple[tuple[int, ...], tuple[float, ...], tuple[float, ...]]


WORD = 1 << 32


def rng(*entropy: int) -> np.random.Generator:
    """`np.random.default_rng(list(entropy))` spelled out: default_rng wraps a PCG64
    seeded by a SeedSequence of its argument, so the stream is the same. A SeedSequence
    reads a sequence of ints as their 32-bit words, one word each below 2**32: handed
    those words as a uint32 array, it skips its own conversion of each int (12 -> 7 us
    a stream) and mixes the same words."""
    if all(0 <= e < WORD for e in entropy):
        seed = np.random.SeedSequence(np.array(entropy, dtype=np.uint32))
    else:  # a word or more each: the SeedSequence's own conversion (or its error)
        seed = np.random.SeedSequence(entropy)
    return np.random.Generator(np.random.PCG64(seed))


class Extra:
    """Samples of a prompt past its first K (`Hidden.extra`): sample i from its own
    stream (the prompt's entropy, then i), drawn the first time it is asked for and kept,
    since it is asked again at each stage of the sample's life. Few prompts are ever
    asked: making this costs one small object."""

    __slots__ = ("_samples", "_entropy", "_z", "_kept")

    def __init__(self, samples: Callable[[np.random.Generator, float, int], Samples],
                 entropy: tuple[int, ...], z: float) -> None:
        self._samples, self._entropy, self._z = samples, entropy, z
        self._kept: dict[int, tuple[int, float, float]] = {}

    def __call__(self, i: int) -> tuple[int, float, float]:
        kept = self._kept.get(i)
        if kept is None:
            lengths, rewards, verify = self._samples(rng(*self._entropy, i), self._z, 1)
            kept = self._kept[i] = (lengths[0], rewards[0], verify[0])
        return kept
