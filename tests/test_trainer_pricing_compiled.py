"""The kernel trainer's pricing compiled (harness/sim/fastcore/pricing.py): the seconds of
the formula as written before (tests/test_trainer_pricer.py's reference), bit for bit, on
random trainers and sequences, with many data-parallel ranks and ties among their loads;
the look-ups it lacks computed between tries; and Python's own path where numba is not
loaded. Every test here failed before the module existed (at its import)."""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.sim.presets import load_hardware, load_model
from harness.sim.trainer import pricer
from harness.sim.trainer.layout import Layout
from harness.sim.trainer.step import KernelTrainModel
from tests.test_trainer_pricer import LENS, bits, kernel_trainers, ref_micro_time


@contextmanager
def numba_not_loaded() -> Iterator[None]:
    """As a process that never loaded the compiled pool: the module out of sys.modules."""
    compiled = sys.modules.pop(pricer.COMPILED, None)
    try:
        yield
    finally:
        if compiled is not None:
            sys.modules[pricer.COMPILED] = compiled


def compiled(k: KernelTrainModel, lens: list[int]) -> float:
    """`priced` compiled (the module imported here: numba is loaded by the tests only)."""
    from harness.sim.fastcore import pricing

    return k.pricer()._compiled(pricing.PRICED.call, sorted(lens, reverse=True))


@settings(max_examples=120, deadline=None)
@given(kernel_trainers(), st.lists(LENS, min_size=1, max_size=6))
def test_the_compiled_seconds_are_the_formulas_bit_for_bit(
        k: KernelTrainModel, micros: list[list[int]]) -> None:
    for lens in micros:
        assert bits(compiled(k, lens)) == bits(ref_micro_time(k, lens)), lens


def test_many_ranks_with_equal_loads_take_the_sequences_as_pythons_heap_gives_them() -> None:
    """128 and 96 data-parallel ranks (verl-fully-async's 512 GPUs at TP 4), 512 sequences
    with many equal lengths, so that loads tie and the lowest rank of equals must win; and
    budgets that cut a rank's sequences into several micro-batches."""
    rng = random.Random(7)
    hw, model = load_hardware("h20"), load_model("qwen2.5-7b")
    for gpus, cp, budget in ((512, 1, 1 << 25), (384, 1, 8192), (512, 2, 20_000)):
        k = KernelTrainModel("h20", hw, model, Layout(gpus, tp=4, cp=cp), micro_tokens=budget)
        for _ in range(3):
            lens = [rng.choice([100, 2000, 2000, 7000, rng.randint(1, 30_000)])
                    for _ in range(512)]
            want = ref_micro_time(k, lens)
            assert bits(compiled(k, lens)) == bits(want)
            with numba_not_loaded():
                assert bits(k.pricer().priced(sorted(lens, reverse=True))) == bits(want)


def test_the_lookups_it_lacks_are_computed_and_kept_as_arrays(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A new trainer's arrays fill as it prices: a length's attention and a padded token
    count's dense parts, each the dicts' value (NaN elsewhere)."""
    monkeypatch.setattr(pricer, "_PARTS", {})  # none kept by the tests before
    monkeypatch.setattr(pricer, "_TIMES", {})
    k = KernelTrainModel("h100-sxm", load_hardware("h100-sxm"), load_model("qwen3-1.7b"),
                         Layout(8, tp=2), scale=0.9)
    looks = k.pricer().looks
    assert bits(compiled(k, [5000, 300, 300])) == bits(ref_micro_time(k, [5000, 300, 300]))
    assert looks.attention[5000] == k.pricer().attention[5000]
    assert looks.attention[300] == k.pricer().attention[300]
    assert sum(1 for v in looks.attention.tolist() if v == v) == 2  # the two lengths only
    unit = pricer.PAD_TO * k.layout.cp
    for tokens in (5000, 300):  # the ranks' micro-batches (four ranks, one sequence each)
        j = -(-tokens // unit)
        assert tuple(looks.dense[j]) == k.pricer().dense[j * pricer.PAD_TO]


def test_a_train_call_goes_compiled_only_where_the_module_is_loaded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.sim.fastcore.pricing  # noqa: F401  (loaded, as a run on the pool has)

    calls: list[list[int]] = []
    monkeypatch.setattr(pricer.KernelPricer, "_compiled",
                        lambda self, priced, order: calls.append(order) or 0.0)
    k = KernelTrainModel("h20", load_hardware("h20"), load_model("qwen3-1.7b"),
                         Layout(4, tp=2), scale=1.1)
    with numba_not_loaded():
        python = k.micro_time([3000, 20])
    assert not calls and python == ref_micro_time(k, [3000, 20])
    other = KernelTrainModel("h20", load_hardware("h20"), load_model("qwen3-1.7b"),
                             Layout(4, tp=2), scale=1.2)
    assert other.micro_time([3000, 21]) == 0.0 and calls == [[3000, 21]]
