"""The simulator's fast paths keep the slow paths' results exactly.

The simulator's trace writer buffers (same bytes, whole lines), and the metrics
read only the kinds they need (same rows as from the whole file). The event heap's
order, cancellation and failures: tests/test_sim_heap.py.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from harness.core.config import RunConfig
from harness.core.metrics import ROUND_METRIC_EVENTS, round_metrics
from harness.core.trace import TraceWriter, read_trace
from harness.run.execute import execute
from harness.sim.trace_buffer import BufferedTraceWriter

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
    monkeypatch.setattr(BufferedTraceWriter, "PACK", 3)  # packed three events at a time
    writer = write(BufferedTraceWriter(tmp_path / "buffered.jsonl", iter(TIMES).__next__))
    plain = (tmp_path / "plain.jsonl").read_bytes()
    # each pack in the file as it is made: 7 events, two packs of 3 written, 1 to go
    packed = b"".join(plain.splitlines(keepends=True)[:6])
    assert (tmp_path / "buffered.jsonl").read_bytes() == packed
    events = writer.events()
    writer.close()
    assert (tmp_path / "buffered.jsonl").read_bytes() == plain
    lines = plain.splitlines()
    assert lines[2] == '{"t":0.123457,"ev":"x","v":1e-7,"s":"é"}'.encode()
    assert lines[4] == b'{"t":1.0,"ev":"y"}'
    assert lines[5] == b'{"t":5,"ev":"z","k":true}'  # a field named t overrides the time
    assert events == [msgspec.json.decode(line) for line in lines]
    assert events[1]["v"] is None  # NaN is written as null, and read back as it
    assert writer.events({"x", "y"}) == events[1:5]


@pytest.mark.parametrize("system", ["slime", "cgp-fgd", "pipelinerl", "april", "rollpacker"])
def test_metrics_from_the_kept_kinds_equal_metrics_from_the_file(system: str,
                                                                 tmp_path: Path) -> None:
    cfg = RunConfig(system=system, workload="sci-jl", groups=8, rounds=2, seed=7).validate()
    rows = execute(cfg, tmp_path / "trace.jsonl")  # decodes only ROUND_METRIC_EVENTS
    events = read_trace(tmp_path / "trace.jsonl", strict=True)
    assert len({e["ev"] for e in events} - ROUND_METRIC_EVENTS) > 0  # something was skipped
    assert repr(rows) == repr(round_metrics(events))  # NaN-safe, bit for bit


def test_a_reader_that_names_its_kinds_gets_only_those(tmp_path: Path) -> None:
    from harness.run.execute import reads
    from harness.studies.reproduce.rollpacker.runs import breakdown

    @reads("run_start", "rollout_start", "run_end")
    def kinds_seen(events: list[dict]) -> list[str]:
        return [e["ev"] for e in events]

    cfg = RunConfig(system="rollpacker", workload="sci-jl", groups=8, update_groups=8,
                    rounds=2, seed=7).validate()
    seen = execute(cfg, tmp_path / "a.jsonl", kinds_seen)
    assert seen == ["run_start", "rollout_start", "rollout_start", "run_end"]
    # RollPacker's breakdown reads a third fewer events, and makes the same of them
    whole = read_trace(tmp_path / "a.jsonl", strict=True)
    assert len(whole) > 1.4 * sum(e["ev"] in breakdown.kinds for e in whole)
    assert repr(execute(cfg, tmp_path / "b.jsonl", breakdown)) == repr(breakdown(whole))


def test_a_writer_that_keeps_some_kinds_holds_them_as_the_whole_writer_would(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(BufferedTraceWriter, "PACK", 2)  # packs fall elsewhere when filtered
    whole = write(BufferedTraceWriter(tmp_path / "a.jsonl", iter(TIMES).__next__, write=False))
    kept = write(BufferedTraceWriter(tmp_path / "b.jsonl", iter(TIMES).__next__, write=False,
                                     keep={"x", "run_end"}))
    assert kept.recorded() == 4  # three x and the run_end; the rest dropped as they came
    assert kept.events() == whole.events({"x", "run_end"})
    assert [e["t"] for e in kept.events()] == [0.0, 0.123457, 0.123457, 2.5]
    assert not (tmp_path / "b.jsonl").exists()
    with pytest.raises(ValueError, match="keeps every event"):
        BufferedTraceWriter(tmp_path / "c.jsonl", iter(TIMES).__next__, keep={"x"})


@pytest.mark.parametrize("system", ["slime", "verl-fully-async", "april"])
def test_an_unwritten_run_keeps_only_what_its_reader_reads_and_reads_the_same(
        system: str, tmp_path: Path) -> None:
    from harness.run.execute import reads

    @reads("run_start", "request_finish", "optimizer_step", "run_end")
    def seen(events: list[dict]) -> list[dict]:
        return events

    cfg = RunConfig(system=system, workload="sci-jl", groups=8, rounds=2, seed=7).validate()
    written = execute(cfg, tmp_path / "a.jsonl", seen)
    kept = execute(cfg, tmp_path / "b.jsonl", seen, write=False)
    assert kept == written and not (tmp_path / "b.jsonl").exists()
    assert {e["ev"] for e in kept} == seen.kinds  # type: ignore[attr-defined]
    assert repr(execute(cfg, tmp_path / "c.jsonl", write=False)) == repr(
        execute(cfg, tmp_path / "d.jsonl"))  # the round metrics: bit for bit


def test_fast_rounding_gives_pythons_doubles() -> None:
    """`round6` (numpy, with Python's round near halves) is round(t, 6) bit for bit:
    times of a long run, exact halves (k + 1/2 millionths that a double holds), values
    next to them, and times past the fast path's range."""
    import random
    import struct

    from harness.sim.trace_buffer import round6

    rng = random.Random(1)
    times = [rng.uniform(0, 10) for _ in range(20000)] + \
        [rng.uniform(0, 5e5) for _ in range(20000)] + \
        [k / 2e6 for k in range(1, 40000, 3)] + [k / 1e6 + 5e-7 for k in range(0, 9000, 7)] + \
        [rng.uniform(1e6, 1e8) for _ in range(2000)] + [0.0, 0.0078125, 123.4567895, 0.1234567891]
    got, want = round6(times), [round(t, 6) for t in times]
    assert [struct.pack("d", g) for g in got] == [struct.pack("d", w) for w in want]


@pytest.mark.parametrize("system", ["cgp", "verl-fully-async"])  # verl's rows are restated
def test_a_large_runs_metrics_read_a_frame_at_a_time_are_the_same(
        system: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past `STREAM_EVENTS` the metrics go over the kept events a frame at a time on each
    pass (`EventFrames`) instead of holding them all: the same rows. Frames of 7 events
    and a threshold of 0 make this small run take that path, frames cut mid-round."""
    from harness.run import execute as execution

    cfg = RunConfig(system=system, workload="sci-jl", groups=16, rounds=3, seed=5)
    whole = execute(cfg.validate(), tmp_path / "a.jsonl.zst")
    monkeypatch.setattr(execution, "STREAM_EVENTS", 0)
    monkeypatch.setattr(BufferedTraceWriter, "PACK", 7)

    def held(*_: object) -> None:
        raise AssertionError("a large run's metrics held every event")

    monkeypatch.setattr(BufferedTraceWriter, "events", held)
    cfg = RunConfig(system=system, workload="sci-jl", groups=16, rounds=3, seed=5)
    assert repr(execute(cfg.validate(), tmp_path / "b.jsonl.zst")) == repr(whole)  # NaN-safe
    assert len(whole) == 3
