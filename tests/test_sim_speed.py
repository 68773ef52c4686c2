"""The simulator's fast paths keep the slow paths' results exactly.

The virtual-time loop runs its own iteration (timer order, cancellation,
failures), the simulator's trace writer buffers (same bytes, whole lines), and
the off-policy statistics skip or share work (same numbers, bit for bit, as the
plain formula).
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import msgspec
import numpy as np
import pytest

from harness.core.config import RunConfig
from harness.core.metrics import ROUND_METRIC_EVENTS, round_metrics
from harness.core.offpolicy import ess, lag_stats, step_stats
from harness.core.trace import TraceWriter, read_trace
from harness.run.execute import execute
from harness.sim.loop import VirtualTimeLoop
from harness.sim.trace_buffer import BufferedTraceWriter


def test_timers_run_in_time_then_scheduling_order() -> None:
    loop = VirtualTimeLoop()
    seen: list[tuple[str, float]] = []

    def note(name: str) -> None:
        seen.append((name, loop.time()))

    async def main() -> None:
        loop.call_at(1.0, note, "a")
        loop.call_at(0.5, note, "b")
        loop.call_at(1.0, note, "c")  # same time as a, scheduled after it
        loop.call_later(0.7, note, "d").cancel()
        loop.call_soon(note, "e")
        await asyncio.sleep(2.0)
        note("end")

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert seen == [("e", 0.0), ("b", 0.5), ("a", 1.0), ("c", 1.0), ("end", 2.0)]


def test_a_failing_callback_is_reported_and_the_loop_goes_on() -> None:
    loop = VirtualTimeLoop()
    errors: list[str] = []
    loop.set_exception_handler(lambda _loop, ctx: errors.append(str(ctx["exception"])))
    seen: list[str] = []

    def boom() -> None:
        raise ValueError("boom")

    async def main() -> None:
        loop.call_soon(boom)
        loop.call_soon(seen.append, "after")
        await asyncio.sleep(1.0)

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert errors == ["boom"] and seen == ["after"]


def test_waiting_on_nothing_is_a_deadlock() -> None:
    loop = VirtualTimeLoop()
    try:
        with pytest.raises(RuntimeError, match="deadlock"):
            loop.run_until_complete(loop.create_future())
    finally:
        loop.close()


EVENTS = [("run_start", {"schema": 2, "config": {"a": [1, 2]}}), ("x", {"v": float("nan")}),
          ("x", {"v": 1e-7, "s": "é"}), ("x", {"spans": [[0, 3], [1, 4]]}), ("y", {}),
          ("z", {"t": 5, "k": True}), ("run_end", {})]
TIMES = [0.0, 0.0, 0.1234567891, 0.1234567891, 1.0, 2.0, 2.5]


def write(writer: TraceWriter) -> TraceWriter:
    for ev, fields in EVENTS:
        writer.emit(ev, **fields)
    return writer


def test_buffered_writer_writes_the_same_bytes(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    write(TraceWriter(tmp_path / "plain.jsonl", iter(TIMES).__next__)).close()
    monkeypatch.setattr(BufferedTraceWriter, "FLUSH_LINES", 3)  # blocks of three lines
    writer = write(BufferedTraceWriter(tmp_path / "buffered.jsonl", iter(TIMES).__next__))
    # before close: the two full blocks are in the file, whole lines only
    assert (tmp_path / "buffered.jsonl").read_bytes().count(b"\n") == 6
    assert (tmp_path / "buffered.jsonl").read_bytes().endswith(b"\n")
    events = writer.events()
    writer.close()
    plain = (tmp_path / "plain.jsonl").read_bytes()
    assert (tmp_path / "buffered.jsonl").read_bytes() == plain
    lines = plain.splitlines()
    assert lines[2] == '{"t":0.123457,"ev":"x","v":1e-7,"s":"é"}'.encode()
    assert lines[4] == b'{"t":1.0,"ev":"y"}'
    assert lines[5] == b'{"t":5,"ev":"z","k":true}'  # a field named t overrides the time
    assert events == [msgspec.json.decode(line) for line in lines]
    assert events[1]["v"] is None  # NaN is written as null, and read back as it
    assert writer.events({"x", "y"}) == events[1:5]


def plain_step_stats(hist: dict[int, int], drift: float, clamp: float,
                     rng: np.random.Generator) -> dict[str, float]:
    """The drift model written out plainly: per-token arrays, no shortcut."""
    tokens = sum(hist.values())
    lags = np.fromiter(hist, dtype=float)
    counts = np.fromiter(hist.values(), dtype=float)
    share = min(1.0, 8192 / tokens)
    drawn = rng.binomial(counts.astype(np.int64), share) if share < 1 else counts.astype(int)
    if drawn.sum() == 0:
        drawn[np.argmax(counts)] = 1
    s2 = np.repeat(drift * lags, drawn)
    w = np.exp(rng.standard_normal(s2.size) * np.sqrt(s2) - s2 / 2)
    return {**lag_stats(hist), "ess": round(ess(w), 6),
            "ess_clamped": round(ess(np.minimum(w, clamp)), 6)}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_step_stats_equal_the_plain_formula_bit_for_bit() -> None:
    draw = np.random.default_rng(0)
    cases = [({0: 60_000}, 0.05, 5.0), ({0: 10, 3: 7}, 0.0, 5.0), ({2: 5}, 0.01, 0.5)]
    for _ in range(200):
        lags = draw.choice(100, int(draw.integers(1, 40)), replace=False)
        hist = {int(lag): int(draw.integers(1, 4000)) for lag in lags}
        cases.append((hist, float(draw.choice([1e-4, 0.01, 0.3, 9.0])),
                      float(draw.choice([0.5, 1.0, 2.0, 1e9]))))
    for i, (hist, drift, clamp) in enumerate(cases):
        want = plain_step_stats(hist, drift, clamp, np.random.default_rng([i, 7]))
        got = step_stats(hist, drift, clamp, lambda i=i: np.random.default_rng([i, 7]))
        assert got.keys() == want.keys()
        for key in want:
            assert got[key] == want[key] or (math.isnan(got[key]) and math.isnan(want[key])), \
                (hist, drift, clamp, key)


def test_an_on_policy_step_draws_nothing() -> None:
    def no_generator() -> np.random.Generator:
        raise AssertionError("an on-policy step needs no random draws")

    stats = step_stats({0: 50_000}, drift=0.05, clamp=5.0, rng=no_generator)
    assert (stats["ess"], stats["ess_clamped"], stats["lag_max"]) == (1.0, 1.0, 0.0)


@pytest.mark.parametrize("system", ["slime", "cgp-fgd", "pipelinerl", "april", "rollpacker"])
def test_metrics_from_the_kept_kinds_equal_metrics_from_the_file(system: str,
                                                                 tmp_path: Path) -> None:
    cfg = RunConfig(system=system, workload="sci-jl", groups=8, rounds=2, seed=7).validate()
    rows = execute(cfg, tmp_path / "trace.jsonl")  # decodes only ROUND_METRIC_EVENTS
    events = read_trace(tmp_path / "trace.jsonl", strict=True)
    assert len({e["ev"] for e in events} - ROUND_METRIC_EVENTS) > 0  # something was skipped
    assert repr(rows) == repr(round_metrics(events))  # NaN-safe, bit for bit
