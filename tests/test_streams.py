"""A prompt's random streams (workloads/streams.py): the same numbers as numpy's
`default_rng` of the same entropy, seeded many at once as numpy seeds each, prompts drawn
together as each alone, and samples past K drawn from their own stream once."""

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


def test_streams_seeded_together_are_numpys_seeding_of_each() -> None:
    # 3 and 4 words (a prompt's, an extra sample's), words across the whole 32-bit range
    words = np.random.default_rng(5).integers(0, 2**32, size=(4, 500), dtype=np.uint32)
    words[:, 0] = (0, 2**32 - 1, 1, 0)
    for n in (3, 4):
        got = streams.pcg64_states([words[j] for j in range(n)])
        for p, (state, inc) in enumerate(got):
            bits = np.random.PCG64(np.random.SeedSequence(words[:n, p])).state
            assert (state, inc) == (bits["state"]["state"], bits["state"]["inc"])
        positioned = streams.Positioned()
        for p in (0, 7, 499):  # a generator set to the state draws as a fresh one
            fresh = np.random.Generator(np.random.PCG64(np.random.SeedSequence(words[:n, p])))
            assert (positioned.at(*got[p]).standard_normal(4).tolist()
                    == fresh.standard_normal(4).tolist())


def test_prompts_drawn_together_are_each_drawn_alone() -> None:
    # every single profile (a slow tail: rp-code), K 4 and 16, a block with gaps and one
    # starting far in the stream; an extra sample past K too
    from workloads.profile import Profile, SimWorkload, load_profile, profile_names

    for name in profile_names():
        profile = load_profile(name)
        if not isinstance(profile, Profile):
            continue  # a mixture draws one prompt at a time
        for k, seed in ((4, 0), (16, 9)):
            w = SimWorkload(profile, seed, k)
            indices = [*range(40), 45, 47, 2**31 + 3]
            for together, index in zip(w.draw_many(indices), indices, strict=True):
                alone = w.draw(index)
                assert together.index == index
                assert ((together.tokens, together.hidden.lengths, together.hidden.rewards,
                         together.hidden.verify_s, together.hidden.kind)
                        == (alone.tokens, alone.hidden.lengths, alone.hidden.rewards,
                            alone.hidden.verify_s, alone.hidden.kind)), (name, k, index)
                assert together.hidden.sample(k + 2) == alone.hidden.sample(k + 2)
