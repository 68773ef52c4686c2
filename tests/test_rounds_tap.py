"""A written run's round metrics made as it goes equal those of its trace read back.

`execute` taps the simulator's trace writer (`BufferedTraceWriter.tap`): each pack's
events of the metrics' kinds go to a `RoundMetrics` as the pack is made, so the run's
rows need no second decode of its trace. What the tap is handed must be what decoding
the lines gives (the same values and types, times rounded; a request's events from the
compiled pool may come as the Structs they were recorded as, with the same fields), pack
after pack in order, each with its kind, and the rows must be `round_metrics` of the
file, for every system, on the Python engines and on the compiled pool.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import asdict

from harness.core.metrics import ROUND_METRIC_EVENTS, RoundMetrics, round_metrics
from harness.core.rounds import AS_RECORDED
from harness.core.trace import read_trace
from harness.run import execute as run_execute
from harness.shared.defaults import resolve_defaults
from harness.sim.runtime import SimRuntime
from harness.sim.trace_buffer import BufferedTraceWriter
from systems import checked_names, get_system
from tests.test_golden import golden_config


@pytest.mark.parametrize("engines", ["python", "compiled"])
@pytest.mark.parametrize("system", checked_names())
def test_the_tap_gets_the_decoded_events(system: str, engines: str,
                                         monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path) -> None:
    """Packs of 64 (many per run): the tapped events, in order, are those the written
    file decodes to, of the metrics' kinds (those of `AS_RECORDED` handed as recorded:
    so for every system they hold what their lines decode to), each with its kind; and
    `execute`'s rows are the file's."""
    monkeypatch.setenv("ROLLOUTBENCH_PYTHON_ENGINES", "1" if engines == "python" else "0")
    monkeypatch.setattr(BufferedTraceWriter, "PACK", 64)
    path = tmp_path / "trace.jsonl.zst"
    runtime = SimRuntime(resolve_defaults(golden_config(system)), path)
    fed: list[Any] = []
    kinds: list[str] = []

    def feed(events: list[Any], names: list[str]) -> None:
        assert len(events) == len(names)
        fed.extend(e if type(e) is dict else asdict(e) for e in events)
        kinds.extend(names)

    runtime.tap(feed, ROUND_METRIC_EVENTS, AS_RECORDED)
    runtime.run(get_system(system))  # its end closes the trace: the last pack fed
    lines = [e for e in read_trace(path) if e["ev"] in ROUND_METRIC_EVENTS]
    assert len(lines) > 100
    assert kinds == [e["ev"] for e in lines]
    # repr: the types too (1 vs 1.0, list vs tuple, None vs NaN), key order aside
    assert [repr(sorted(e.items())) for e in fed] == [repr(sorted(e.items())) for e in lines]

    used: list[RoundMetrics] = []
    made = run_execute.RoundMetrics

    def spy() -> RoundMetrics:
        used.append(made())
        return used[-1]

    monkeypatch.setattr(run_execute, "RoundMetrics", spy)
    rows = run_execute.execute(golden_config(system), tmp_path / "again.jsonl.zst")
    assert len(used) == 1 and rows
    assert repr(rows) == repr(round_metrics(read_trace(tmp_path / "again.jsonl.zst")))


def test_a_streaming_trace_is_restated_from_its_events() -> None:
    """Requests that finish in a later round than their own (`crosses`): the rows need
    the whole trace again, and say so rather than give the unrestated figures."""
    events = [
        {"t": 0.0, "ev": "run_start", "system": "x", "workload": "w"},
        {"t": 0.0, "ev": "rollout_start", "round": 0, "version": 0},
        {"t": 0.0, "ev": "request_submit", "round": 0, "group": 0, "sample": 0},
        {"t": 1.0, "ev": "rollout_start", "round": 1, "version": 1},
        {"t": 2.0, "ev": "request_finish", "group": 0, "sample": 0, "response_tokens": 10,
         "status": "finished", "versions": [0, 1], "version_spans": [[0, 4], [1, 6]]},
    ]
    metrics = RoundMetrics()
    metrics.feed(events[:2])
    metrics.feed(events[2:])
    assert metrics.crosses
    with pytest.raises(ValueError, match="crosses"):
        metrics.rows()
    assert repr(metrics.rows(events)) == repr(round_metrics(events))


def test_a_tap_set_after_the_first_pack_is_refused(tmp_path: Path) -> None:
    writer = BufferedTraceWriter(tmp_path / "a.jsonl", iter([0.5, 1.0]).__next__)
    writer.record("run_start", system="x")
    writer.close()
    with pytest.raises(RuntimeError, match="before its first pack"):
        writer.tap(lambda events, kinds: None, ROUND_METRIC_EVENTS)


def test_the_tap_gets_what_json_makes_of_a_field(tmp_path: Path) -> None:
    """A tuple, a NaN or a time given as a field, of a kind not handed as recorded, reach
    the tap as its line decodes (a list, None, the field); a Struct as itself."""
    from harness.sim.trace_events import Makers

    times = iter([0.5, 1.0000004, 2.0, 2.5]).__next__
    writer = BufferedTraceWriter(tmp_path / "a.jsonl", times)
    fed: list[Any] = []
    writer.tap(lambda events, kinds: fed.extend(events), ROUND_METRIC_EVENTS | {"decision"})
    writer.record("run_start", config={"groups": (32, 64)})
    writer.record("optimizer_step", step=1, ess=float("nan"), spans=[(1, 2)])
    writer.record("decision", t=7, what="x")
    writer.record("request_admit", group=1, sample=0, engine=0)  # not a tapped kind
    finish = Makers.of(True).finish
    writer.record_many([3.0], [finish(3.0, "request_finish", 1, 0, 5, "finished", [0, 0],
                                      [[0, 5]])])
    writer.close()
    lines = (tmp_path / "a.jsonl").read_text().splitlines()
    assert fed[:3] + [asdict(fed[3])] == [e for e in map(json.loads, lines)
                                          if e["ev"] != "request_admit"]
    assert fed[1]["ess"] is None and fed[1]["spans"] == [[1, 2]] and fed[2]["t"] == 7
    assert type(fed[3]) is not dict and fed[3].version_spans == [[0, 5]]
    assert asdict(fed[3]) == {"t": 3.0, "ev": "request_finish", "group": 1, "sample": 0,
                      "response_tokens": 5, "status": "finished", "versions": [0, 0],
                      "version_spans": [[0, 5]]}
