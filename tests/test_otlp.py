"""`rolloutbench export-otlp` and `rolloutbench import otlp`: a trace as OTLP/JSON with the
RL span names, and back, whole.

The hand-made trace below is small enough to work every span out by hand; the round
trip runs real simulations of several systems and compares their metrics."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import msgspec
import pytest
from typer.testing import CliRunner

from harness.analysis.otlp import export
from harness.cli.app import app
from harness.core.config import RunConfig
from harness.core.metrics import round_metrics
from harness.core.trace import read_trace
from harness.imports import SourceError, read, to_trace, write
from harness.run.execute import execute

HEAD = {"t": 0.0, "ev": "run_start", "schema": 2, "system": "slime", "workload": "w",
        "runtime": "sim", "seed": 3, "config": {"rounds": 1}, "version": "x"}
# one round: group 0's sample 0 is cut at 1.0 s and resumed, finishing at 3.0 s with
# 40 tokens, 10 of them carried; its group is checked by 3.5 s and trained 4 -> 6 s
TINY = [HEAD,
        {"t": 0.0, "ev": "rollout_start", "round": 0, "version": 0},
        {"t": 0.0, "ev": "request_submit", "round": 0, "group": 0, "sample": 0,
         "prompt_tokens": 12, "resumed_tokens": 0},
        {"t": 1.0, "ev": "request_finish", "group": 0, "sample": 0, "response_tokens": 10,
         "status": "aborted", "versions": [0, 0]},
        {"t": 1.25, "ev": "request_submit", "round": 0, "group": 0, "sample": 0,
         "prompt_tokens": 12, "resumed_tokens": 10},
        {"t": 3.0, "ev": "request_finish", "group": 0, "sample": 0, "response_tokens": 40,
         "status": "finished", "versions": [0, 0]},
        {"t": 3.0, "ev": "group_complete", "group": 0, "round": 0},
        {"t": 3.5, "ev": "group_materialized", "group": 0, "samples": [0], "rewards": [1.0]},
        {"t": 3.5, "ev": "rollout_complete", "round": 0},
        {"t": 3.5, "ev": "batch_dispatch", "batch": 0, "groups": [0], "round": 0},
        {"t": 4.0, "ev": "train_start", "batch": 0},
        {"t": 6.0, "ev": "train_end", "batch": 0},
        {"t": 6.0, "ev": "optimizer_step", "step": 1, "version": 1},
        {"t": 6.5, "ev": "weights_published", "version": 1},
        {"t": 6.5, "ev": "run_end"}]


def spans_of(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return doc["resourceSpans"][0]["scopeSpans"][0]["spans"]


def attrs(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: a["value"] for a in span["attributes"]}


def sid(trace_id: str, *key: object) -> str:
    return hashlib.sha256("|".join(map(str, (trace_id, *key))).encode()).hexdigest()[:16]


def test_the_tiny_trace_exports_to_the_spans_worked_by_hand() -> None:
    doc = export(TINY)
    spans = spans_of(doc)
    assert [s["name"] for s in spans] == ["rolloutbench.run", "rl.loop", "rl.sample",
                                          "rl.sample", "rl.reward", "rl.train", "rl.sync"]
    run, loop, cut, resumed, reward, train, sync = spans
    identity = '["slime","w",3,{"rounds":1}]'
    trace_id = hashlib.sha256(f"rolloutbench-trace|{identity}".encode()).hexdigest()[:32]
    assert {s["traceId"] for s in spans} == {trace_id}
    assert run["spanId"] == sid(trace_id, "rolloutbench.run", "run") and "parentSpanId" not in run
    assert loop["spanId"] == sid(trace_id, "rl.loop", "round", 0)
    assert cut["spanId"] == sid(trace_id, "rl.sample", "sample", 0, 0, 1)
    assert resumed["spanId"] == sid(trace_id, "rl.sample", "sample", 0, 0, 2)
    assert [s["parentSpanId"] for s in spans[2:]] == [loop["spanId"]] * 5
    assert loop["parentSpanId"] == run["spanId"]
    times = [(s["startTimeUnixNano"], s["endTimeUnixNano"]) for s in spans]
    assert times == [("0", "6500000000"), ("0", "3500000000"), ("0", "1000000000"),
                     ("1250000000", "3000000000"), ("3000000000", "3500000000"),
                     ("4000000000", "6000000000"), ("6000000000", "6500000000")]
    # the resumed request read 12 + 10 tokens and generated 30 of its 40
    assert attrs(resumed)["gen_ai.usage.input_tokens"] == {"intValue": "12"}
    assert attrs(resumed)["gen_ai.usage.output_tokens"] == {"intValue": "30"}
    assert attrs(resumed)["rolloutbench.response_tokens"] == {"intValue": "40"}
    assert attrs(cut)["rolloutbench.status"] == {"stringValue": "aborted"}
    assert attrs(reward)["rolloutbench.rewards"] == {
        "arrayValue": {"values": [{"doubleValue": 1.0}]}}
    assert attrs(sync)["rolloutbench.version"] == {"intValue": "1"}
    assert [e["name"] for e in resumed["events"]] == ["rolloutbench.request_submit",
                                                      "rolloutbench.request_finish"]
    seqs = sorted(int(attrs(e)["rolloutbench.seq"]["intValue"])
                  for s in spans for e in s.get("events", []))
    assert seqs == list(range(len(TINY)))  # every event once
    resource = {a["key"]: a["value"] for a in doc["resourceSpans"][0]["resource"]["attributes"]}
    assert resource["rl.system"] == {"stringValue": "slime"}
    assert resource["rl.run.id"] == {"stringValue": trace_id}


def test_the_same_trace_exports_the_same_bytes_and_another_seed_other_ids() -> None:
    encode = msgspec.json.encode
    assert encode(export(TINY)) == encode(export([dict(e) for e in TINY]))
    other = [{**HEAD, "seed": 4}, *TINY[1:]]
    assert spans_of(export(other))[0]["traceId"] != spans_of(export(TINY))[0]["traceId"]


def _exported(tmp_path: Path, events: list[dict[str, Any]]) -> Path:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(export(events)))
    return path


def test_import_otlp_gives_the_tiny_trace_back(tmp_path: Path) -> None:
    source = read("otlp", [_exported(tmp_path, TINY)])
    assert to_trace(source) == TINY and source.samples == []


def test_import_otlp_of_a_cut_runs_export_says_it_was_cut(tmp_path: Path) -> None:
    """Exported as far as it went, it comes back as far as it went, and is not called a
    whole run's trace (a new user's trial)."""
    cut = [e for e in TINY if e["ev"] != "run_end"]
    done = CliRunner().invoke(app, ["import", "otlp", str(_exported(tmp_path, cut)), "--out",
                                    str(tmp_path / "back.jsonl")])
    assert done.exit_code == 0, done.output
    assert "no run_end: its run was cut" in done.stdout
    assert read_trace(tmp_path / "back.jsonl") == cut
    done = CliRunner().invoke(app, ["import", "otlp", str(_exported(tmp_path, TINY)), "--out",
                                    str(tmp_path / "whole.jsonl")])
    assert "(the exported trace, whole)" in done.stdout


def test_import_otlp_reads_json_lines_of_requests_as_a_collector_writes(tmp_path: Path
                                                                       ) -> None:
    doc = export(TINY)
    spans = spans_of(doc)
    halves = [{"resourceSpans": [{**doc["resourceSpans"][0], "scopeSpans": [
        {**doc["resourceSpans"][0]["scopeSpans"][0], "spans": part}]}]}
        for part in (spans[4:], spans[:4])]  # in another order than the trace's
    path = tmp_path / "traces.json"
    path.write_text("".join(json.dumps(h) + "\n" for h in halves))
    assert to_trace(read("otlp", [path])) == TINY


def _close(a: object, b: object) -> bool:
    return (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
            ) or a == b


@pytest.mark.parametrize("system", ["slime", "cgp", "april", "areal", "verl"])
def test_export_then_import_keeps_every_metric(tmp_path: Path, system: str) -> None:
    trace = tmp_path / "trace.jsonl.zst"
    execute(RunConfig(system=system, workload="sci-jl", groups=4, group_size=2, rounds=2,
                      seed=5).validate(), trace)
    out = tmp_path / "out.json"
    runner = CliRunner()
    done = runner.invoke(app, ["export-otlp", str(trace), "--out", str(out)])
    assert done.exit_code == 0, done.output
    back = tmp_path / "back.jsonl"
    done = runner.invoke(app, ["import", "otlp", str(out), "--out", str(back)])
    assert done.exit_code == 0, done.output
    before, after = read_trace(trace, strict=True), read_trace(back, strict=True)
    assert after == before
    rows, again = round_metrics(before), round_metrics(after)
    assert len(rows) == 2
    for row, other in zip(rows, again, strict=True):
        assert row.keys() == other.keys()
        assert all(_close(row[k], other[k]) for k in row), (row, other)


# -- bad input: one line naming the place, exit 2, nothing written ---------------------

def _doc(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """An OTLP document with one span holding these (name, attributes) span events."""
    made = [{"timeUnixNano": "0", "name": name,
             "attributes": [{"key": k, "value": v} for k, v in a.items()]}
            for name, a in events]
    return {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "0" * 32, "spanId": "1" * 16, "name": "rl.loop", "events": made}]}]}]}


def _line(seq: int, event: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return (f"rolloutbench.{event['ev']}", {
        "rolloutbench.seq": {"intValue": str(seq)},
        "rolloutbench.event": {"stringValue": json.dumps(event)}})


END = {"t": 1.0, "ev": "run_end"}
BAD = {
    "not JSON": ("{\"resourceSpans\": [", "t.json:1: the last line is cut short"),
    "no resourceSpans": ({"spans": []}, "t.json:1: missing field 'resourceSpans'"),
    "a span list that is not one": ({"resourceSpans": [{"scopeSpans": [{"spans": 3}]}]},
                                    "scopeSpans[0]: field 'spans' must be a list, got 3"),
    "no events of ours": (_doc([("exception", {})]),
                          "no rolloutbench.* events (ROLL's? import roll)"),
    "a seq missing": (_doc([_line(0, HEAD), _line(2, END)]),
                      "rolloutbench.seq 1 is missing (of 2 events)"),
    "a seq twice": (_doc([_line(0, HEAD), _line(0, END)]),
                    ".events[1]: rolloutbench.seq 0 appears twice"),
    "no line": (_doc([("rolloutbench.run_end", {"rolloutbench.seq": {"intValue": "0"}})]),
                "lacks 'rolloutbench.event'"),
    "a seq that is text": (_doc([("rolloutbench.run_end", {
        "rolloutbench.seq": {"stringValue": "0"}, "rolloutbench.event": {"stringValue": "{}"}})]),
        "field 'rolloutbench.seq' must be an integer, got '0'"),
    "a line of another kind": (_doc([("rolloutbench.run_end", _line(0, HEAD)[1])]),
                               "rolloutbench.event does not hold a 'run_end' event"),
    "an unknown AnyValue": (_doc([("rolloutbench.run_end", {
        "rolloutbench.seq": {"bytesValue": "AA=="}})]), "unknown AnyValue kind 'bytesValue'"),
    "run_start not first": (_doc([_line(0, END), _line(1, HEAD)]),
                            "rolloutbench.seq 0: run_start must come first and once"),
    "time going backwards": (_doc([_line(0, HEAD), _line(1, {"t": 2.0, "ev": "rollout_start",
                                                              "round": 0, "version": 0}),
                                   _line(2, END)]),
                             "rolloutbench.seq 2: run_end field 't' goes backwards: 1.0 after"),
    "an event missing a field": (_doc([_line(0, HEAD), _line(1, {"t": 1.0,
                                                                 "ev": "rollout_start"})]),
                                 "rolloutbench.seq 1: rollout_start lacks field(s) 'round'"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_otlp_input_is_one_line_exit_2_and_no_trace(tmp_path: Path, case: str) -> None:
    doc, message = BAD[case]
    path = tmp_path / "t.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    with pytest.raises(SourceError, match=None) as err:
        read("otlp", [path])
    assert message in str(err.value)
    out = tmp_path / "out.jsonl"
    done = CliRunner().invoke(app, ["import", "otlp", str(path), "--out", str(out)])
    assert done.exit_code == 2 and len(done.output.strip().splitlines()) == 1, done.output
    assert message in done.output.replace("\n", "") and not out.exists()


def test_import_otlp_takes_one_file(tmp_path: Path) -> None:
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps(export(TINY)))
    with pytest.raises(SourceError, match=r"a\.json and 1 more: give one OTLP file \(one trace "
                       r"each\)$"):  # a folder's files not listed, each
        read("otlp", [tmp_path])


@pytest.mark.parametrize(("args", "message"), [
    (["--out", "{tmp}/o.jsonl"], "--out: {tmp}/o.jsonl: OTLP/JSON is one JSON document; name"),
    (["--out", "{tmp}/exists.json"], "--out: {tmp}/exists.json exists (--force overwrites it)"),
])
def test_export_otlp_bad_options_are_one_line(tmp_path: Path, args: list[str],
                                              message: str) -> None:
    trace = tmp_path / "t.jsonl"
    write(TINY, trace)
    (tmp_path / "exists.json").write_text("mine\n")
    done = CliRunner().invoke(app, ["export-otlp", str(trace),
                                    *[a.format(tmp=tmp_path) for a in args]])
    assert done.exit_code == 2 and len(done.output.strip().splitlines()) == 1, done.output
    assert message.format(tmp=tmp_path) in done.output.replace("\n", "")
    assert (tmp_path / "exists.json").read_text() == "mine\n"


def test_export_otlp_refuses_what_is_not_a_trace(tmp_path: Path) -> None:
    bad = tmp_path / "t.jsonl"
    bad.write_text('{"t": 0.0, "ev": "rollout_start", "round": 0, "version": 0}\n')
    out = tmp_path / "o.json"
    # a folder is read as a run folder: here one without a trace
    for trace, message in ((bad, "t.jsonl:1"), (tmp_path, "trace.jsonl.zst: cannot open")):
        done = CliRunner().invoke(app, ["export-otlp", str(trace), "--out", str(out)])
        assert done.exit_code == 2 and message in done.output, done.output
        assert len(done.output.strip().splitlines()) == 1 and not out.exists()
