"""The compiled engine core (harness/sim/fastcore) against hand-worked timelines and against
`SimEngine` itself, event for event: the same (time, kind, request, engine, value) rows,
times bit for bit, and each engine's events in the same order as the Python engine
emits them.

Streams: seeded draws over step models (the roofline of a dense and a MoE model, a flat
step, a small-batch knob; the measured-kernel table of a default run, a table with
attention-DP prefill lanes), KV capacities down to a few prompts (preemption by
recomputation on most segments), batch caps and priorities; a grid of times on which
submissions land exactly on segment ends and inside prefills; and hypothesis's own.
"""

from __future__ import annotations

import importlib.util
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

if importlib.util.find_spec("numba") is None:  # looked for, not imported: see conftest
    pytest.skip("numba is not installed", allow_module_level=True)

from harness.core.config import RunConfig  # noqa: E402
from harness.shared.defaults import resolve_defaults  # noqa: E402
from harness.sim.calibration import resolve  # noqa: E402
from harness.sim.fastcore import KINDS, Events, Stream, simulate  # noqa: E402
from harness.sim.fastcore.reference import random_stream, run_python  # noqa: E402
from harness.sim.kernels.source import decode_model  # noqa: E402
from harness.sim.perf import DecodeModel, TableDecodeModel  # noqa: E402
from harness.sim.presets import load_hardware, load_model  # noqa: E402

SUBMIT, ADMIT, PREEMPT, FINISH = range(4)


def flat(step: float = 0.01, **extra: float) -> DecodeModel:
    return DecodeModel(step, 0.0, 0.0, 0.0, 0.0, 0.0, **extra)  # type: ignore[arg-type]


def stream(t: list[float], prompt: list[int], target: list[int], engine: list[int] | None = None,
           priority: list[int] | None = None, engines: int = 1) -> Stream:
    n = len(t)
    return Stream(np.array(t, dtype=float), np.array(priority or [0] * n),
                  np.array(prompt), np.array(target), np.array(engine or [0] * n), engines)


def by_engine(ev: Events) -> dict[int, list[tuple[float, int, int, int]]]:
    """Each engine's events in emission order (engines interleave differently)."""
    out: dict[int, list[tuple[float, int, int, int]]] = {}
    for t, k, r, e, v in zip(ev.t.tolist(), ev.kind.tolist(), ev.request.tolist(),
                             ev.engine.tolist(), ev.value.tolist(), strict=True):
        out.setdefault(e, []).append((t, k, r, v))
    return out


def assert_same(s: Stream, decode: DecodeModel, capacity: int, max_running: int) -> Events:
    fast, slow = simulate(s, decode, capacity, max_running), run_python(s, decode, capacity,
                                                                      max_running)
    assert fast.rows() == slow.rows()
    assert by_engine(fast) == by_engine(slow)
    assert fast.preemptions == slow.preemptions
    return fast


def test_a_submit_cuts_the_segment_at_the_step_under_way() -> None:
    # A (100 tokens) alone from 0; B (50) at 0.255 cuts A's segment after step 26 (0.26),
    # is admitted there and ends 50 steps later (0.76); A ends at its step 100 (1.0).
    ev = assert_same(stream([0.0, 0.255], [10, 10], [100, 50]), flat(), 10**6, 64)
    rows = list(zip(ev.t.tolist(), ev.kind.tolist(), ev.request.tolist(), ev.value.tolist(),
                    strict=True))
    assert [(k, r, v) for _, k, r, v in rows] == [
        (SUBMIT, 0, 10), (ADMIT, 0, 0), (SUBMIT, 1, 10), (ADMIT, 1, 0), (FINISH, 1, 50),
        (FINISH, 0, 100)]
    assert [t for t, *_ in rows] == pytest.approx([0, 0, 0.255, 0.26, 0.76, 1.0])


def test_a_full_cache_preempts_the_newest_and_recomputes_it() -> None:
    # capacity 30, prompts 10, targets 20: both admitted (ctx 20); room (30 - 20) // 2 = 5
    # steps; at step 5 the cache holds 30, the next step would overflow: B, the newest, goes
    # back with its 5 tokens; A runs its 15 left (0.20); B is prefilled again with 15 and
    # makes its last 15 (0.35), 20 tokens in all.
    ev = assert_same(stream([0.0, 0.0], [10, 10], [20, 20]), flat(), 30, 64)
    assert ev.preemptions == 1
    rows = list(zip(ev.t.tolist(), ev.kind.tolist(), ev.request.tolist(), ev.value.tolist(),
                    strict=True))
    assert [(k, r, v) for _, k, r, v in rows] == [
        (SUBMIT, 0, 10), (SUBMIT, 1, 10), (ADMIT, 0, 0), (ADMIT, 1, 0), (PREEMPT, 1, 0),
        (FINISH, 0, 20), (ADMIT, 1, 0), (FINISH, 1, 20)]
    assert [t for t, *_ in rows] == pytest.approx([0, 0, 0, 0, 0.05, 0.20, 0.20, 0.35])


def test_priority_then_arrival_and_the_batch_cap() -> None:
    # one slot (max_running 1): C (priority 0, submitted last) goes before A's twin B
    # (priority 1); every request of 10 steps, so each ends 0.1 after the last.
    ev = assert_same(stream([0.0, 0.0, 0.0], [1, 1, 1], [10, 10, 10], priority=[0, 1, 0]),
                     flat(), 10**6, 1)
    finishes = [(round(t, 9), r) for t, k, r in zip(ev.t.tolist(), ev.kind.tolist(),
                                                   ev.request.tolist(), strict=True)
                if k == FINISH]
    assert finishes == [(0.1, 0), (0.2, 2), (0.3, 1)]


def kernels() -> TableDecodeModel:
    """The measured-kernel table a default run prices its engine by (verl-fully-async's
    Qwen3-1.7B, TP 2, on the A100 stand-in table, with the framework's overhead)."""
    cfg = RunConfig(system="verl-fully-async", workload="lsat-ar")
    resolve_defaults(cfg)
    model = decode_model(cfg.sim, resolve(cfg.sim), cfg.sim.rollout_tp)
    assert type(model) is TableDecodeModel and len(model.batches) > 10
    return model


def models() -> list[DecodeModel | TableDecodeModel]:
    hw = load_hardware("h100-sxm")
    built = [DecodeModel.build(hw, load_model(name), tp, 0.8, 0.003, 0.6)
             for name, tp in (("qwen2.5-7b", 1), ("qwen2.5-7b", 2), ("qwen3-30b-a3b", 2))]
    assert built[2].experts_s > 0  # the MoE term is exercised
    return [*built, flat(), DecodeModel(0.004, 1e-6, 0.006, 3e-9, 2e-5, 1e-5, 1e-4, 1e-9, 2e-3,
                                        small_batch=4, small_batch_scale=1.7), kernels(),
            TableDecodeModel((1, 3, 16, 300), (0.004, 0.005, 0.007, 0.02),
                             (1e-8, 2e-8, 1e-7, 3e-6), 1e-5, 1e-9, 2e-3, 1e-4, small_batch=2,
                             small_batch_scale=1.3, prefill_lanes=4)]


@pytest.mark.parametrize("decode", models(),
                         ids=["7b", "7b-tp2", "moe", "flat", "small", "kernels", "table-dp"])
def test_same_events_as_the_python_engine(decode: DecodeModel | TableDecodeModel) -> None:
    preempted = 0
    for seed, capacity, max_running, priorities in itertools.product(
            range(2), (3000, 40_000, 10**6), (4, 256), (1, 3)):
        s = random_stream(seed, 400, 3, rate=30, priorities=priorities)
        preempted += assert_same(s, decode, capacity, max_running).preemptions
    assert preempted > 1000  # the small caches preempt, often


def test_same_events_when_submits_land_on_segment_ends_and_in_prefills() -> None:
    # steps of 1/8 s and prefills of 1/4 s + 1/64 s a token; submissions on a 1/8 s grid:
    # equal times on the heap, exactly, and cuts before a segment's first step
    decode = DecodeModel(0.125, 0.0, 0.0, 0.0, 0.0, 1 / 64, prefill_fixed_s=0.25)
    for seed in range(4):
        s = random_stream(seed, 300, 2, rate=4, prompt=(0, 8), target=(1, 24), group=3)
        grid = Stream(np.round(s.submit_t * 8) / 8, s.priority, s.prompt, s.target, s.engine,
                      s.engines)
        assert_same(grid, decode, 60, 8)
        assert_same(grid, decode, 10**6, 64)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 2), st.integers(0, 40),
                          st.integers(1, 60), st.integers(0, 1)), min_size=1, max_size=40),
       st.integers(1, 200), st.integers(1, 6))
def test_same_events_on_any_stream(rows: list[tuple[int, int, int, int, int]], capacity: int,
                                   max_running: int) -> None:
    t, prio, prompt, target, engine = (list(c) for c in zip(*rows, strict=True))
    s = stream([x / 8 for x in t], prompt, target, engine, prio, engines=2)
    assert_same(s, DecodeModel(0.125, 0.0, 0.0, 1 / 1024, 0.0, 1 / 64, prefill_fixed_s=0.25),
                capacity, max_running)


class Wrapped(DecodeModel):
    """A step model the core does not know (as speculative decoding's wrappers are)."""


def test_what_it_cannot_price_or_run_is_refused() -> None:
    s = stream([0.0], [1], [1])
    with pytest.raises(TypeError, match="an EagerStep over one of them only, not Wrapped"):
        simulate(s, Wrapped(0.01, 0, 0, 0, 0, 0), 100, 1)
    with pytest.raises(ValueError, match="target must be >= 1"):
        stream([0.0], [1], [0])
    with pytest.raises(ValueError, match=r"engine must be in \[0, 1\)"):
        stream([0.0], [1], [1], engine=[1])
    with pytest.raises(ValueError, match="submit_t must be finite"):
        stream([-1.0], [1], [1])
    assert KINDS[FINISH] == "request_finish"
