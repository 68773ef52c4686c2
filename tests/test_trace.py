"""The trace: writer/reader round trip, and reader errors that name file and line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.trace import REQUIRED, SCHEMA, STATUSES, TraceError, TraceWriter, read_trace

ROLLOUTBENCH = str(Path(sys.executable).parent / "rolloutbench")

HEAD = {"t": 0.0, "ev": "run_start", "schema": SCHEMA, "system": "slime", "workload": "w",
        "runtime": "sim", "seed": 0, "config": {"groups": 2}, "version": "0.1.0"}
START = {"t": 0.0, "ev": "rollout_start", "round": 0, "version": 0}
FINISH = {"t": 1.5, "ev": "request_finish", "group": 0, "sample": 1, "response_tokens": 7,
          "status": "finished", "versions": [0, 0]}


def clock_of(times: list[float]) -> Callable[[], float]:
    it = iter(times)
    return lambda: next(it)


def lines(*events: dict[str, Any] | str) -> str:
    return "".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in events)


def test_writer_reader_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TraceWriter(path, clock_of([0.0, 0.25, 1.0000004, 2.5])) as w:
        written = [
            w.emit("run_start", schema=SCHEMA, system="cgp", workload="sci-jl", runtime="sim",
                   seed=3, config={"sim": {"tp": 2}}, version="0.1.0"),
            w.emit("rollout_start", round=0, version=0),
            w.emit("request_finish", group=1, sample=0, response_tokens=12, status="aborted",
                   versions=[0, 1], version_spans=[[0, 5], [1, 7]]),
            w.emit("run_end"),
        ]
    events = read_trace(path)
    assert events == written
    assert [e["t"] for e in events] == [0.0, 0.25, 1.0, 2.5]  # rounded to 6 decimals
    assert events[2]["version_spans"] == [[0, 5], [1, 7]]  # extra fields survive
    # one event per line, each ending in a newline
    raw = path.read_bytes()
    assert raw.count(b"\n") == 4 and raw.endswith(b"\n")


def test_writer_flushes_each_event(tmp_path: Path) -> None:
    """A reader sees every emitted event before the writer is closed."""
    path = tmp_path / "t.jsonl"
    w = TraceWriter(path, clock_of([0.0, 1.0]))
    w.emit("run_start", schema=SCHEMA, system="s", workload="w", runtime="sim", seed=0,
           config={}, version="0")
    w.emit("rollout_start", round=0, version=0)
    assert [e["ev"] for e in read_trace(path)] == ["run_start", "rollout_start"]
    w.close()
    w.close()  # closing twice is harmless


BAD_CASES = {
    "invalid_json": (lines(HEAD, START, '{"t": 1, "ev": "run_end",}'), 3, "not valid JSON"),
    "incomplete_line": (lines(HEAD, START) + json.dumps(FINISH), 3, "incomplete line"),
    "unknown_kind": (lines(HEAD, {"t": 1.0, "ev": "request_teleport", "group": 0}), 2,
                     "unknown event kind 'request_teleport'"),
    "missing_versions": (lines(HEAD, START, {k: v for k, v in FINISH.items()
                                             if k != "versions"}), 3, "versions"),
    "bad_status": (lines(HEAD, START, START, {**FINISH, "status": "done"}), 4, "status"),
    "first_not_run_start": (lines(START, HEAD), 1, "first event must be run_start"),
    "missing_t": (lines(HEAD, {"ev": "run_end"}), 2, "'t'"),
    "boolean_t": (lines(HEAD, {"t": True, "ev": "run_end"}), 2, "'t'"),
    "not_an_object": (lines(HEAD, "[1, 2]"), 2, "JSON object"),
    "missing_header_field": (lines({k: v for k, v in HEAD.items() if k != "seed"}), 1, "seed"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_reader_error_names_file_and_line(tmp_path: Path, case: str) -> None:
    text, line, what = BAD_CASES[case]
    path = tmp_path / f"{case}.jsonl"
    path.write_text(text)
    with pytest.raises(TraceError) as err:
        read_trace(path)
    message = str(err.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert what in message
    assert "\n" not in message


def test_reader_rejects_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    with pytest.raises(TraceError, match="empty") as err:
        read_trace(path)
    assert str(path) in str(err.value)


def test_reader_missing_file_is_a_trace_error(tmp_path: Path) -> None:
    path = tmp_path / "nope.jsonl"
    with pytest.raises(TraceError) as err:
        read_trace(path)
    assert str(path) in str(err.value)


def test_reader_accepts_every_required_field_set() -> None:
    """A minimal event of every kind, with just its required fields, reads back."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "all.jsonl"
        events = [HEAD] + [
            {"t": 1.0, "ev": kind, **{f: ("finished" if f == "status" else 0)
                                      for f in fields}}
            for kind, fields in REQUIRED.items() if kind != "run_start"
        ]
        path.write_text(lines(*events))
        assert read_trace(path) == events


def _bad_trace(path: Path) -> None:
    path.write_text(lines(HEAD, START, '{"t": 2.0, "ev": "rollout_start", "round": 0,'))


def _run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run([ROLLOUTBENCH, *args], capture_output=True, text=True, cwd=cwd,
                          env=env, stdin=subprocess.DEVNULL, check=False)


def test_cli_metrics_bad_trace_exits_2_naming_the_line(tmp_path: Path) -> None:
    _bad_trace(tmp_path / "bad.jsonl")
    out = _run_cli("metrics", "bad.jsonl", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stdout == ""
    assert "bad.jsonl:3" in out.stderr
    assert "Traceback" not in out.stderr


def test_cli_metrics_bad_trace_error_is_one_line(tmp_path: Path) -> None:
    deep = tmp_path / ("a" * 40) / ("b" * 40)
    deep.mkdir(parents=True)
    _bad_trace(deep / "bad.jsonl")
    out = _run_cli("metrics", str(deep / "bad.jsonl"), cwd=tmp_path)
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert f"{deep / 'bad.jsonl'}:3" in out.stderr


# -- property tests ------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=6,
)
TIME = st.floats(min_value=0, max_value=1e7, allow_nan=False)


@st.composite
def event_fields(draw: st.DrawFn, kind: str) -> dict[str, Any]:
    required = REQUIRED[kind]
    known = {"status": st.sampled_from(STATUSES),  # the reader refuses any other
             "schema": st.integers(1, SCHEMA)}
    fields = {f: draw(known.get(f, JSON)) for f in required}
    extra_key = st.text(min_size=1, max_size=6).filter(
        lambda k: k not in ("t", "ev", "self") and k not in required)
    fields.update(draw(st.dictionaries(extra_key, JSON, max_size=3)))
    return fields


@st.composite
def traces(draw: st.DrawFn) -> list[tuple[str, dict[str, Any]]]:
    kinds = draw(st.lists(st.sampled_from([k for k in REQUIRED if k != "run_start"]),
                          max_size=12))
    return [("run_start", draw(event_fields("run_start")))] + [
        (k, draw(event_fields(k))) for k in kinds]


@settings(max_examples=60, deadline=None)
@given(events=traces(), times=st.lists(TIME, min_size=13, max_size=13))
def test_any_valid_trace_reads_back_equal(
    events: list[tuple[str, dict[str, Any]]], times: list[float]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.jsonl"
        with TraceWriter(path, clock_of(sorted(times))) as w:
            written = [w.emit(kind, **fields) for kind, fields in events]
        assert read_trace(path) == written
        assert [e["ev"] for e in written] == [k for k, _ in events]


@settings(max_examples=60, deadline=None)
@given(events=traces(), data=st.data())
def test_a_trace_cut_mid_line_names_the_cut_line(
    events: list[tuple[str, dict[str, Any]]], data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.jsonl"
        with TraceWriter(path, lambda: 1.0) as w:
            for kind, fields in events:
                w.emit(kind, **fields)
        raw = path.read_bytes()
        cut = data.draw(st.integers(1, len(raw) - 1).filter(lambda p: raw[p - 1] != ord("\n")))
        path.write_bytes(raw[:cut])
        line = raw[:cut].count(b"\n") + 1
        with pytest.raises(TraceError, match=f"^{re.escape(str(path))}:{line}: incomplete line"):
            read_trace(path)


def test_cli_metrics_error_names_a_path_with_brackets(tmp_path: Path) -> None:
    (tmp_path / "d[a]").mkdir()
    _bad_trace(tmp_path / "d[a]" / "bad.jsonl")
    out = _run_cli("metrics", "d[a]/bad.jsonl", cwd=tmp_path)
    assert out.returncode == 2
    assert "d[a]/bad.jsonl:3" in out.stderr, out.stderr


def test_a_second_writer_on_one_path_replaces_the_trace(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    for _ in range(2):
        with TraceWriter(path, lambda: 0.0) as w:
            w.emit("run_start", schema=2)
    assert path.read_bytes().count(b"run_start") == 1
