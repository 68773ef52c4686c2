"""Eager steps (`sim.engine_eager`: harness/sim/kernels/eager.py's `EagerStep`) in the
compiled core: the step time bit for bit against the Python model, over both wrapped
models and the terms a real run builds; every event against `SimEngine` on the same
streams; and a default run's eager verl-fully-async on the compiled pool, the same trace
bytes as on `SimEngine`s.
"""

from __future__ import annotations

import importlib.util
import random
from dataclasses import replace
from pathlib import Path

import pytest

if importlib.util.find_spec("numba") is None:  # looked for, not imported: see conftest
    pytest.skip("numba is not installed", allow_module_level=True)

from harness.core.config import RunConfig  # noqa: E402
from harness.shared.defaults import resolve_defaults  # noqa: E402
from harness.sim.calibration import resolve  # noqa: E402
from harness.sim.fastcore.choice import decode_refusal  # noqa: E402
from harness.sim.fastcore.reference import random_stream  # noqa: E402
from harness.sim.kernels.eager import EagerStep  # noqa: E402
from harness.sim.kernels.source import decode_model  # noqa: E402
from harness.sim.perf import DecodeModel, TableDecodeModel  # noqa: E402
from tests.test_fastcore import assert_same  # noqa: E402


def eager_of(sim_overrides: dict[str, object]) -> EagerStep:
    """The eager step model a default verl-fully-async run builds with these settings."""
    cfg = RunConfig(system="verl-fully-async", workload="lsat-ar")
    resolve_defaults(cfg)
    cfg.sim.engine_eager = True
    for key, value in sim_overrides.items():
        setattr(cfg.sim, key, value)
    model = decode_model(cfg.sim, resolve(cfg.sim), cfg.sim.rollout_tp)
    assert type(model) is EagerStep
    return model


def hand_made() -> list[EagerStep]:
    """Eager steps over a roofline and a table, host-bound for none, some or all of a
    segment's steps (the bisection's three ends), with and without the framework's cap and
    a small-batch scale of the eager step's own."""
    roof = DecodeModel(0.004, 1e-6, 0.006, 3e-9, 2e-5, 1e-5, 1e-4, 1e-9, 2e-3, small_batch=4,
                       small_batch_scale=1.7)
    table = TableDecodeModel((1, 3, 16, 300), (0.004, 0.005, 0.007, 0.02),
                             (1e-8, 2e-8, 1e-7, 3e-6), 1e-5, 1e-9, 2e-3, 1e-4, small_batch=2,
                             small_batch_scale=1.3, prefill_lanes=4)
    out = []
    for kernels in (roof, table):
        for host, gaps, cap in ((0.001, 0.0002, 0), (0.012, 0.001, 8), (0.5, 0.002, 64)):
            step = EagerStep(kernels, host, gaps, 0.0011, 2e-5, cap,
                             kernels.prefill_per_token_s, kernels.prefill_per_token2_s,
                             kernels.prefill_fixed_s, kernels.admit_per_request_s,
                             kernels.prefill_lanes)
            out.append(step)
    out.append(replace(out[1], small_batch=3, small_batch_scale=1.4))
    return out


MODELS = [*hand_made(), eager_of({}), eager_of({"rollout_tp": 1}),
          eager_of({"step_model": "roofline"})]


@pytest.mark.parametrize("decode", MODELS, ids=[f"m{i}" for i in range(len(MODELS))])
def test_the_step_time_is_the_python_models_bit_for_bit(decode: EagerStep) -> None:
    from harness.sim.fastcore.stepmodel import step_params, steps_time, steps_within

    p = step_params(decode, 300)
    rng = random.Random(7)
    for _ in range(2000):
        n, b, ctx = rng.randint(0, 3000), rng.randint(1, 300), rng.randint(0, 100_000)
        assert steps_time(p, n, b, ctx) == decode.steps_time(n, b, ctx)
        dt, cap = rng.random() * 20, rng.randint(1, 3000)
        assert steps_within(p, dt, b, ctx, cap) == decode.steps_within(dt, b, ctx, cap)


def test_the_bisection_meets_each_end() -> None:
    """The hand-made models reach each end of the bisection (no step host-bound, all, and
    a split inside a segment), so the test above covers every branch."""
    seen = set()
    for step in hand_made():
        for n, b, ctx in ((200, 4, 100), (200, 64, 50_000), (2000, 200, 0)):
            k = step.kernels
            first = k.steps_time(1, b, ctx) + step.gaps_s >= step.host_s
            last = k.steps_time(1, b, ctx + (n - 1) * b) + step.gaps_s >= step.host_s
            seen.add((first, last))
    assert seen == {(False, False), (False, True), (True, True)}


@pytest.mark.parametrize("decode", [MODELS[1], MODELS[4], MODELS[-3], MODELS[-1]],
                         ids=["roof", "table", "run", "run-roofline"])
def test_same_events_as_the_python_engine(decode: EagerStep) -> None:
    preempted = 0
    for seed, capacity, max_running in ((0, 3000, 4), (1, 40_000, 256), (2, 10**6, 64)):
        s = random_stream(seed, 400, 3, rate=30)
        preempted += assert_same(s, decode, capacity, max_running).preemptions  # type: ignore[arg-type]
    assert preempted > 100


def test_what_is_refused_stays_refused() -> None:
    """An eager step over a model the core has no formula for stays on `SimEngine`s."""
    from tests.test_fastcore import Wrapped

    inner = Wrapped(0.01, 0, 0, 0, 0, 0)
    step = EagerStep(inner, 0.01, 0.001, prefill_per_token_s=0.0, prefill_per_token2_s=0.0,
                     prefill_fixed_s=0.0, admit_per_request_s=0.0)
    assert decode_refusal(step, 64) == "a step model of EagerStep"
    assert decode_refusal(MODELS[-2], 64) is None
    table = MODELS[-3]
    assert decode_refusal(table, 1 << 17) == "max_running 131072 past the core's table"


def test_an_eager_run_is_the_same_trace_on_the_core(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine_pools: list[str]) -> None:
    """verl-fully-async served eagerly (as the verl-async reproduction's eager reading
    runs it): syncs in flight, partial rollouts sent on with their tokens; the core's trace
    and `SimEngine`s' the same bytes."""
    from harness.sim.fastcore.choice import FORCE_PYTHON
    from tests.test_core_pool_abort import _both_paths

    def config() -> RunConfig:
        cfg = RunConfig(system="verl-fully-async", workload="lsat-ar", groups=16,
                        update_groups=2, rounds=3, group_size=4, seed=5)
        cfg.sim.rollout_engines, cfg.sim.engine_eager = 3, True
        v = cfg.verl_async
        v.staleness_threshold, v.partial_rollout = 0.5, True
        v.trigger_parameter_sync_step, v.require_batches = 1, 2
        return cfg.validate()

    monkeypatch.delenv(FORCE_PYTHON, raising=False)
    core = _both_paths(config, tmp_path, monkeypatch, engine_pools)
    assert core.count(b'"status":"aborted"') > 10
