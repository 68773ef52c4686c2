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


# numpy's SeedSequence (numpy/random/bit_generator.pyx: its hashmix, mix and
# generate_state) and PCG64's seeding from it (pcg64.h: pcg_setseq_128_srandom_r)
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R, _MASK32, _POOL = 0xCA01F9DD, 0x4973F715, 0xFFFFFFFF, 4
_PCG_MULT = (2549297995355413924 << 64) + 4865540595714422341
_MASK128 = (1 << 128) - 1


def pcg64_states(words: list[np.ndarray]) -> list[tuple[int, int]]:
    """(state, inc) of `PCG64(SeedSequence(entropy))` for many entropies at once, each of
    the same number of 32-bit words (`words[j][p]`: entropy p's j-th word, uint32): what
    `rng` seeds, a hundred prompts in one pass. The hash's constants do not depend on the
    words, only on how many there are, so every entropy is mixed by the same array
    operations (uint32 arithmetic wraps as the C does). A prompt's stream costs 2.5 us
    here against `rng`'s 8.6 (`tests/test_streams.py` holds it to numpy's own)."""
    n, size = len(words), len(words[0])
    const = _INIT_A

    def hashmix(value: np.ndarray) -> np.ndarray:
        nonlocal const
        value = value ^ np.uint32(const)
        const = (const * _MULT_A) & _MASK32
        value = value * np.uint32(const)
        return value ^ (value >> np.uint32(16))

    def mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        out = np.uint32(_MIX_L) * x - np.uint32(_MIX_R) * y
        return out ^ (out >> np.uint32(16))

    pool = [hashmix(words[i] if i < n else np.zeros(size, dtype=np.uint32))
            for i in range(_POOL)]
    for src in range(_POOL):
        for dst in range(_POOL):
            if src != dst:
                pool[dst] = mix(pool[dst], hashmix(pool[src]))
    for src in range(_POOL, n):
        for dst in range(_POOL):
            pool[dst] = mix(pool[dst], hashmix(words[src]))
    const, state = _INIT_B, []
    for i in range(8):  # 4 uint64 words, each from two uint32 ones, low first
        value = pool[i % _POOL] ^ np.uint32(const)
        const = (const * _MULT_B) & _MASK32
        value = value * np.uint32(const)
        state.append((value ^ (value >> np.uint32(16))).astype(np.uint64))
    u64 = [(state[2 * j] | (state[2 * j + 1] << np.uint64(32))).tolist() for j in range(4)]
    out = []
    for high, low, seq_high, seq_low in zip(*u64, strict=True):
        inc = ((((seq_high << 64) | seq_low) << 1) | 1) & _MASK128
        start = (inc + ((high << 64) | low)) & _MASK128  # state 0 stepped, plus the seed
        out.append(((start * _PCG_MULT + inc) & _MASK128, inc))
    return out


class Positioned:
    """One PCG64 and its Generator, set to the start of one stream after another (`at`):
    a prompt's draws without a new SeedSequence, PCG64 and Generator each."""

    def __init__(self) -> None:
        self._bits = np.random.PCG64(0)
        self.generator = np.random.Generator(self._bits)

    def at(self, state: int, inc: int) -> np.random.Generator:
        """The generator, at the start of the stream whose seeded (state, inc) these are."""
        self._bits.state = {"bit_generator": "PCG64", "state": {"state": state, "inc": inc},
                            "has_uint32": 0, "uinteger": 0}
        return self.generator


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
