"""The replicas' windows (harness/sim/replica_windows.py): a memory-only run whose reader
names the measure keeps one record a window instead of two events a request, and the
reader's figures are the same as from those events, on both engine paths and written."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from harness.core.config import RunConfig
from harness.run.execute import execute, measured, reader_kinds, reads
from harness.sim.fastcore.choice import FORCE_PYTHON
from harness.sim.replica_windows import KIND, ReplicaWindows
from harness.studies.reproduce.verl_async.summary import replica_kinds, replica_times, summary
from tests.test_golden import golden_config

REQUESTS = frozenset({"request_admit", "request_finish"})


@reads(*summary.kinds, also=replica_kinds)  # type: ignore[attr-defined]
def _from_events(events: list[dict[str, Any]]) -> dict[str, float]:
    """The summary as it reads a run without the measure: from the request events."""
    assert not any(e["ev"] == KIND for e in events)
    return summary(events)


@reads(*summary.kinds, also=replica_kinds,  # type: ignore[attr-defined]
       instead={KIND: REQUESTS})
def _kinds_seen(events: list[dict[str, Any]]) -> set[str]:
    return {e["ev"] for e in events}


def _colocated() -> RunConfig:
    cfg = golden_config("verl")
    cfg.rounds, cfg.sim.placement, cfg.sim.rollout_engines = 4, "colocated", 2
    return cfg.validate()


def test_a_measure_stands_in_for_all_its_kinds_or_none() -> None:
    kinds = reader_kinds(summary, _colocated())
    assert REQUESTS <= kinds
    swapped = measured(summary, kinds)
    assert KIND in swapped and not REQUESTS & swapped
    assert swapped - {KIND} == kinds - REQUESTS
    partial = kinds - {"request_finish"}
    assert measured(summary, partial) == partial  # not all it stands for: kept as asked
    assert measured(_from_events, kinds) == kinds  # a reader that names no measure


@pytest.mark.parametrize("engines", ["core", "python"])
def test_a_colocated_run_reads_the_same_from_its_windows(
        engines: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if engines == "python":
        monkeypatch.setenv(FORCE_PYTHON, "1")
    else:
        pytest.importorskip("numba")
    cfg = _colocated()
    seen = execute(cfg, tmp_path / "k.jsonl", _kinds_seen, write=False)
    assert KIND in seen and not REQUESTS & seen
    got = execute(cfg, tmp_path / "a.jsonl", summary, write=False)
    want = execute(cfg, tmp_path / "b.jsonl", _from_events, write=False)
    assert math.isfinite(got["generate_s"]) and got["generate_s"] > 0
    assert math.isfinite(got["lead_s"]) and got["windows"] >= 2
    assert got == want
    # written: the file holds no record, and the reader reads the events again
    written = execute(cfg, tmp_path / "w.jsonl", summary, write=True)
    assert written == want
    assert KIND not in (tmp_path / "w.jsonl").read_text()


def test_replica_times_by_hand_from_records_and_from_events() -> None:
    """A window [10, 20): first admission at 11; replica 0 last finishes at 15, replica 1
    at 19, replica 2 nothing. Mean generation (15 + 19) / 2 - 11 = 6; the longest's lead
    19 - 11 - 6 = 2. The window before it, and one with no finish, count for nothing."""
    windows = [(10.0, 20.0), (20.0, 30.0)]
    records = [{"t": 10.0, "ev": KIND, "since": 0.0, "first_admit": 2.0,
                "last_finish": [[0, 3.0]]},
               {"t": 20.0, "ev": KIND, "since": 10.0, "first_admit": 11.0,
                "last_finish": [[0, 15.0], [1, 19.0]]},
               {"t": 30.0, "ev": KIND, "since": 20.0, "first_admit": 21.0,
                "last_finish": []}]
    assert replica_times(records, windows) == (6.0, 2.0)
    events = [{"t": 11.0, "ev": "request_admit", "group": 0, "sample": 0, "engine": 1},
              {"t": 11.5, "ev": "request_admit", "group": 0, "sample": 1, "engine": 0},
              {"t": 12.0, "ev": "request_admit", "group": 0, "sample": 2, "engine": 0},
              {"t": 14.0, "ev": "request_finish", "group": 0, "sample": 1},
              {"t": 15.0, "ev": "request_finish", "group": 0, "sample": 2},
              {"t": 19.0, "ev": "request_finish", "group": 0, "sample": 0},
              {"t": 21.0, "ev": "request_admit", "group": 1, "sample": 0, "engine": 0}]
    assert replica_times(events, windows) == (6.0, 2.0)


def test_a_cut_records_the_window_since_the_last_and_clears_it() -> None:
    """Each cut reads the marks once; times rounded as an event's; None: no admission."""
    marks = iter([(1.23456789, [(0, 2.0000004), (3, 5.5)]), (math.inf, [])])
    got: list[tuple[str, dict[str, Any]]] = []
    now = [4.0]
    windows = ReplicaWindows(lambda: next(marks), lambda ev, **f: got.append((ev, f)),
                             lambda: now[0])
    emit = windows.cutting(lambda ev, **f: got.append((ev, f)))
    emit("rollout_start", round=0)
    emit("train_start", batch=0)  # not an edge: no cut
    now[0] = 9.5
    emit("run_end")
    assert got == [
        (KIND, {"since": 0.0, "first_admit": 1.234568,
                "last_finish": [[0, 2.0], [3, 5.5]]}),
        ("rollout_start", {"round": 0}), ("train_start", {"batch": 0}),
        (KIND, {"since": 4.0, "first_admit": None, "last_finish": []}), ("run_end", {})]
