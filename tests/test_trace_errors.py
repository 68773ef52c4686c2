"""Broken and interrupted traces.

A broken trace (cut in the middle, events out of order, a field of the wrong
type or missing) is refused with one line that names the file, the line and the
field. An interrupted run (no `run_end`, or one that names an error; also a last
line cut mid-write) is a valid prefix: `rolloutbench metrics` reports the rounds
that finished, exactly as the whole trace would, flags the rest `incomplete`, warns
on stderr and exits 0.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core.files import dump_json
from harness.core.metrics import (
    KEYS,
    OFFPOLICY_KEYS,
    finished_rounds,
    metrics_for_traces,
    prefix_metrics,
    round_metrics,
    step_metrics,
    steps_for_traces,
)
from harness.core.trace import SCHEMA, CutLine, Trace, TraceError, read_prefix, read_trace
from harness.core.yardstick import delivered
from systems import system_names

ROLLOUTBENCH = str(Path(sys.executable).parent / "rolloutbench")
GOLDEN = Path(__file__).parent / "golden"

HEAD = {"t": 0.0, "ev": "run_start", "schema": SCHEMA, "system": "slime", "workload": "w",
        "runtime": "sim", "seed": 0, "config": {}, "version": "0.1.0"}
START = {"t": 0.5, "ev": "rollout_start", "round": 0, "version": 0}
SUBMIT = {"t": 1.0, "ev": "request_submit", "round": 0, "group": 0, "sample": 0,
          "prompt_tokens": 9}
FINISH = {"t": 2.0, "ev": "request_finish", "group": 0, "sample": 0, "response_tokens": 7,
          "status": "finished", "versions": [0, 0]}
DISPATCH = {"t": 3.0, "ev": "batch_dispatch", "batch": 0, "groups": [0]}
STEP = {"t": 4.0, "ev": "optimizer_step", "step": 1, "version": 1}
END = {"t": 5.0, "ev": "run_end"}


def text(*events: dict[str, Any] | str) -> str:
    return "".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in events)


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run([ROLLOUTBENCH, *args], capture_output=True, text=True, cwd=cwd,
                          env=env, stdin=subprocess.DEVNULL, check=False, timeout=120)


def same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    """Rows equal, NaN included."""
    return dump_json(a) == dump_json(b)


# -- broken traces: refused, naming line and field ------------------------------

# id -> (lines, bad line, what the message must say); every reader refuses these
BROKEN: dict[str, tuple[list[dict[str, Any] | str], int, list[str]]] = {
    "t_is_a_string": ([HEAD, START, {**SUBMIT, "t": "1.0"}], 3,
                      ["request_submit", "'t'", "number", '"1.0"']),
    "t_is_null": ([HEAD, {**START, "t": None}], 2, ["'t'", "null"]),
    "t_negative": ([HEAD, {**START, "t": -1.0}], 2, ["'t'", ">= 0"]),
    "t_goes_backwards": ([HEAD, START, SUBMIT, {**FINISH, "t": 0.75}], 4,
                         ["'t'", "backwards", "0.75", "1.0", "line 3"]),
    "event_before_run_start": ([SUBMIT, HEAD], 1, ["first event must be run_start",
                                                   "request_submit"]),
    "second_run_start": ([HEAD, START, HEAD], 3, ["second run_start"]),
    "ev_missing": ([HEAD, {"t": 1.0, "round": 0}], 2, ["'ev'"]),
    "ev_not_a_string": ([HEAD, {"t": 1.0, "ev": 7}], 2, ["'ev'", "7"]),
    "required_field_missing": ([HEAD, START, {k: v for k, v in DISPATCH.items()
                                              if k != "groups"}], 3,
                               ["batch_dispatch", "'groups'"]),
    "two_fields_missing": ([HEAD, {"t": 1.0, "ev": "rollout_start"}], 2,
                           ["'round'", "'version'"]),
    "bad_status": ([HEAD, START, SUBMIT, {**FINISH, "status": "done"}], 4,
                   ["'status'", '"done"']),
    "not_an_object": ([HEAD, "17"], 2, ["JSON object", "17"]),
    "truncated_mid_line": ([HEAD, START, json.dumps(SUBMIT)[:25], json.dumps(FINISH)], 3,
                           ["not valid JSON"]),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
@pytest.mark.parametrize("reader", ["read_trace", "read_prefix"])
def test_broken_trace_names_line_and_field(tmp_path: Path, case: str, reader: str) -> None:
    lines, line, words = BROKEN[case]
    path = tmp_path / "t.jsonl"
    path.write_text(text(*lines))
    with pytest.raises(TraceError) as err:
        read_trace(path) if reader == "read_trace" else read_prefix(path, allow_cut=True)
    message = str(err.value)
    assert message.startswith(f"{path}:{line}: "), message
    for word in words:
        assert word in message, (word, message)
    assert "\n" not in message


# Wrong types the general reader lets through (its contract: required fields are
# present) but the metrics cannot use: `strict` reading refuses them.
WRONG_TYPES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "round_is_a_string": ({**START, "round": "0"}, ["rollout_start", "'round'", "integer"]),
    "group_is_a_float": ({**SUBMIT, "group": 1.5}, ["'group'", "integer", "1.5"]),
    "bool_is_not_an_integer": ({**SUBMIT, "sample": True}, ["'sample'", "true"]),
    "groups_not_a_list": ({**DISPATCH, "groups": "0,1"}, ["'groups'", "list of integers"]),
    "versions_hold_a_string": ({**FINISH, "versions": [0, "1"]}, ["'versions'"]),
    "version_spans_not_pairs": ({**FINISH, "version_spans": [[0]]}, ["'version_spans'"]),
    "ess_a_string": ({**STEP, "ess": "high"}, ["optimizer_step", "'ess'", "number"]),
    "header_seed_a_string": ({**HEAD, "seed": "0"}, ["run_start", "'seed'"]),
    "config_not_an_object": ({**HEAD, "config": []}, ["'config'", "object"]),
}


@pytest.mark.parametrize("case", sorted(WRONG_TYPES))
def test_strict_reading_names_the_field_of_the_wrong_type(tmp_path: Path, case: str) -> None:
    bad, words = WRONG_TYPES[case]
    lines = [bad, START, END] if bad["ev"] == "run_start" else [HEAD, bad, END]
    path = tmp_path / "t.jsonl"
    path.write_text(text(*lines))
    assert len(read_trace(path)) == 3  # the general reader: required fields are there
    line = 1 if bad["ev"] == "run_start" else 2
    for read in (lambda: read_trace(path, strict=True), lambda: read_prefix(path)):
        with pytest.raises(TraceError) as err:
            read()
        message = str(err.value)
        assert message.startswith(f"{path}:{line}: "), message
        for word in words:
            assert word in message, (word, message)
        assert "\n" not in message


def test_strict_reading_refuses_events_after_run_end(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(text(HEAD, START, END, {**STEP, "t": 6.0}))
    assert len(read_trace(path)) == 4
    with pytest.raises(TraceError, match=r":4: optimizer_step after run_end \(line 3\)"):
        read_prefix(path)


def test_a_long_or_multiline_value_stays_on_one_short_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(text(HEAD, {**START, "round": "x\n" * 500}))
    with pytest.raises(TraceError) as err:
        read_prefix(path)
    message = str(err.value)
    assert "\n" not in message and len(message) < len(str(path)) + 120, message
    assert "'round'" in message and "..." in message


@pytest.mark.parametrize("case", ["t_is_a_string", "t_goes_backwards", "required_field_missing",
                                  "event_before_run_start"])
def test_cli_metrics_refuses_a_broken_trace_in_one_line(tmp_path: Path, case: str) -> None:
    lines, line, words = BROKEN[case]
    (tmp_path / "t.jsonl").write_text(text(*lines))
    out = cli("metrics", "t.jsonl", "--json", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert out.stderr.startswith(f"error: t.jsonl:{line}: ")
    assert all(word in out.stderr for word in words), out.stderr
    assert "Traceback" not in out.stderr


def test_cli_metrics_refuses_a_wrong_type_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text(text(HEAD, START, {**DISPATCH, "groups": "0"}, END))
    out = cli("metrics", "t.jsonl", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip() == ('error: t.jsonl:3: batch_dispatch field \'groups\' must be '
                                  'a list of integers, got "0"')


# -- interrupted runs: a valid prefix -------------------------------------------


def golden(system: str) -> list[dict[str, Any]]:
    return read_trace(GOLDEN / f"{system}.jsonl")


# Systems whose last round is known to be over once the weights are published
# after its rollout and training (pipelinerl publishes before its round ends).
ROUND_ENDS_IN_A_PUBLISH = ("slime", "cgp", "cgp-fgd", "verl", "april", "rollpacker")


@pytest.mark.parametrize("system", system_names())
def test_every_prefix_of_a_trace_gives_the_finished_rounds_exactly(system: str) -> None:
    """Cut a golden trace after every line: no error; each round the prefix calls
    finished has exactly the whole trace's figures; finished rounds stay finished."""
    events = golden(system)
    full = round_metrics(events)
    assert not any(r["incomplete"] for r in prefix_metrics(Trace(Path("x"), events)))
    before: set[int] = set()
    for n in range(1, len(events)):
        trace = Trace(Path("x"), events[:n])
        assert not trace.complete and "run_end" in trace.problem()
        rows = prefix_metrics(trace)
        started = [e["round"] for e in events[:n] if e["ev"] == "rollout_start"]
        assert [r["round"] for r in rows] == started
        done = {r["round"] for r in rows if not r["incomplete"]}
        assert done == finished_rounds(events[:n])
        assert before <= done, n
        before = done
        for row in rows:
            if row["incomplete"]:
                assert all(math.isnan(row[k]) for k in (*KEYS, *OFFPOLICY_KEYS))
            else:
                # a streaming run's phases are the whole run's: a prefix has none
                want = {k: v for k, v in full[row["round"]].items() if k != "phase"}
                assert same([{k: v for k, v in row.items() if k != "incomplete"}], [want]), n
    # everything but run_end: the last round counts as finished where the trace can tell
    last = {r["round"] for r in prefix_metrics(Trace(Path("x"), events[:-1]))
            if not r["incomplete"]}
    if system in ROUND_ENDS_IN_A_PUBLISH:
        assert last == {r["round"] for r in full}
    else:  # laminar too: its tokens count by time (harness.core.streaming), a late pull's
        # old version in its own round on; by version, none of its rounds was final
        assert last >= {r["round"] for r in full[:-1]}


@pytest.mark.parametrize("system", ["slime", "april", "pipelinerl"])
@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_trace_cut_anywhere_reads_with_partial(tmp_path: Path, system: str,
                                                 data: st.DataObject) -> None:
    """Cut the bytes anywhere past the header: with `allow_cut` the complete lines
    before the cut are read; without it a cut mid-line names that line."""
    raw = (GOLDEN / f"{system}.jsonl").read_bytes()
    header = raw.index(b"\n") + 1
    cut = data.draw(st.integers(header, len(raw) - 1), label="cut")
    path = tmp_path / "t.jsonl"
    path.write_bytes(raw[:cut])
    whole = raw[:cut].count(b"\n")
    trace = read_prefix(path, allow_cut=True)
    assert len(trace.events) == whole
    mid_line = raw[cut - 1] != ord("\n")
    assert trace.cut_line == (whole + 1 if mid_line else None)
    if mid_line:
        with pytest.raises(CutLine, match=f":{whole + 1}: incomplete line"):
            read_prefix(path)
    rows = metrics_for_traces([str(path)], partial=True)
    assert same(rows, prefix_metrics(Trace(path, read_trace(GOLDEN / f"{system}.jsonl")[:whole])))


def interrupted(tmp_path: Path, system: str = "slime", keep: float = 0.75,
                tail: str = "") -> tuple[Path, list[dict[str, Any]]]:
    """A golden trace cut at a line boundary (a share `keep` of its lines), plus `tail`."""
    lines = (GOLDEN / f"{system}.jsonl").read_text().splitlines(keepends=True)
    path = tmp_path / f"{system}.jsonl"
    path.write_text("".join(lines[: int(len(lines) * keep)]) + tail)
    return path, read_trace(GOLDEN / f"{system}.jsonl")


def said(stderr: str) -> list[str]:
    """The messages on stderr, each wrapped one joined again (a wrapped line's rest is
    indented: `harness.cli.common.warning`)."""
    out: list[str] = []
    for line in stderr.strip().splitlines():
        if line.startswith("  ") and out:
            out[-1] += " " + line.strip()
        else:
            out.append(line)
    return out


def test_cli_metrics_of_an_interrupted_run(tmp_path: Path) -> None:
    path, events = interrupted(tmp_path)
    out = cli("metrics", path.name, "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    warning = said(out.stderr)  # one warning, wrapped at 100 columns
    assert len(warning) == 1, out.stderr
    assert warning[0].startswith(f"warning: {path.name}: incomplete trace (no run_end")
    assert "round(s) 1 did not finish" in warning[0]
    rows = json.loads(out.stdout)
    assert [(r["round"], r["incomplete"]) for r in rows] == [(0, False), (1, True)]
    full = json.loads(dump_json(round_metrics(events)))
    # each row: the round's fields, then the run's delivered figures (as far as it went)
    kept = [json.loads(line) for line in path.read_text().splitlines()]
    fig = json.loads(dump_json(delivered(kept)))
    assert {k: v for k, v in rows[0].items() if k != "incomplete"} == {**full[0], **fig}
    assert all(rows[1][k] is None for k in KEYS)
    # the table form reads it too
    table = cli("metrics", path.name, cwd=tmp_path)
    assert table.returncode == 0 and table.stderr == out.stderr
    assert "slime" in table.stdout


def test_cli_metrics_of_a_complete_run_has_no_warning(tmp_path: Path) -> None:
    out = cli("metrics", str(GOLDEN / "cgp.jsonl"), "--json", cwd=tmp_path)
    assert out.returncode == 0 and out.stderr == ""
    rows = json.loads(out.stdout)
    assert [r["incomplete"] for r in rows] == [False, False]


def test_cli_metrics_of_a_run_that_ended_in_an_error(tmp_path: Path) -> None:
    end = json.dumps({"t": 999.0, "ev": "run_end", "error": "interrupted"}) + "\n"
    path, _ = interrupted(tmp_path, keep=0.9, tail=end)
    out = cli("metrics", path.name, "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "the run ended with an error (\"interrupted\")" in out.stderr
    assert [r["incomplete"] for r in json.loads(out.stdout)] == [False, True]


def test_cli_metrics_of_a_line_cut_mid_write(tmp_path: Path) -> None:
    # read as every command reads it (tests/test_partial_readers.py); --partial, which
    # it once needed, is kept for scripts and changes nothing
    path, _ = interrupted(tmp_path, keep=0.3, tail='{"t": 99.0, "ev": "request_fin')
    cut = len(path.read_text().splitlines())
    for extra in ([], ["--partial"]):
        out = cli("metrics", path.name, *extra, "--json", cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert len(said(out.stderr)) == 1, out.stderr
        assert f"line {cut} was cut mid-write and is left out" in said(out.stderr)[0]
        assert [r["incomplete"] for r in json.loads(out.stdout)] == [True]


def test_cli_metrics_steps_of_an_interrupted_run(tmp_path: Path) -> None:
    path, events = interrupted(tmp_path, keep=0.8)
    out = cli("metrics", path.name, "--steps", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stderr.startswith(f"warning: {path.name}: incomplete trace")
    rows = json.loads(out.stdout)
    full = json.loads(dump_json(step_metrics(events)))
    assert 0 < len(rows) < len(full) and rows == full[: len(rows)]
    assert same(steps_for_traces([str(path)]), step_metrics(read_trace(path)))


def test_cli_metrics_of_a_trace_cut_before_any_round(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text(text(HEAD))
    out = cli("metrics", "t.jsonl", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []
    assert "no round started" in out.stderr
    # nothing but a cut header: no events at all
    (tmp_path / "t.jsonl").write_text(json.dumps(HEAD)[:30])
    out = cli("metrics", "t.jsonl", "--partial", cwd=tmp_path)
    assert out.returncode == 2
    assert "empty trace (line 1 was cut mid-write)" in out.stderr
