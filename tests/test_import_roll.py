"""`rolloutbench import roll`: ROLL's OTLP trace (tests/fixtures/roll/traces/traces.jsonl,
made by hand in the shape ROLL's receiver writes, as harness/imports/roll.py cites) becomes
a timed trace whose rounds, requests, checks and trainer are worked out here by hand.

The fixture, in seconds after its clock's 1764000000 (t0 = 101.5, the first request):
step 1 (100-130): prompt 7 has two requests, the first cut at 105.0 and sent again
105.2-108.0 (rewards 108.0-109.5), the second 101.6-110.0 (110.0-111.0); prompt 8's two
run 102.0-116.0 (116.0-118.5) and 102.5-117.0 (117.0-118.0); `generate` ends at 120.0,
`old_log_probs_and_values` starts it at 120.0 and `train` ends at 129.0; step 2's
`model_update` ends at 131.0. Step 2 (130-150): a validation prompt (left out), then
prompt 9's two requests 132.0-136.0 (136.0-137.0) and 132.0-138.5 (138.5-139.0);
`generate` ends at 140.0, the trainer runs 140.0-149.0, and no step follows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.core.metrics import round_metrics
from harness.imports import SourceError, read, to_trace

FIXTURE = Path(__file__).parent / "fixtures" / "roll"


def of(events: list[dict[str, Any]], ev: str) -> list[dict[str, Any]]:
    return [e for e in events if e["ev"] == ev]


def test_roll_steps_become_rounds_timed_by_hand() -> None:
    source = read("roll", [FIXTURE])
    events = to_trace(source)
    head = events[0]
    assert head["system"] == "roll" and head["import"]["timed"] is True
    # two groups in step 1, one in step 2: a tie, and a replay takes the fewer
    assert head["config"] == {"rounds": 2, "groups": 1, "group_size": 2,
                              "max_response_tokens": None}
    assert head["import"]["source_rounds"] == [1, 2]
    assert [(e["t"], e["round"], e["version"]) for e in of(events, "rollout_start")] == [
        (0.0, 0, 1), (30.5, 1, 2)]
    submits = [(e["t"], e["group"], e["sample"]) for e in of(events, "request_submit")]
    assert submits == [(0.0, 0, 0), (0.1, 0, 1), (0.5, 1, 0), (1.0, 1, 1), (3.7, 0, 0),
                       (30.5, 2, 0), (30.5, 2, 1)]  # prompt 7's cut request sent again
    finishes = [(e["t"], e["group"], e["sample"], e["status"])
                for e in of(events, "request_finish")]
    assert finishes == [(3.5, 0, 0, "aborted"), (6.5, 0, 0, "finished"),
                        (8.5, 0, 1, "finished"), (14.5, 1, 0, "finished"),
                        (15.5, 1, 1, "finished"), (34.5, 2, 0, "finished"),
                        (37.0, 2, 1, "finished")]
    # checked when its last reward call ended (finish + the call), not at generate's end
    assert [(e["t"], e["group"], e["verify_s"]) for e in of(events, "group_materialized")] == [
        (9.5, 0, [1.5, 1.0]), (17.0, 1, [2.5, 1.0]), (37.5, 2, [1.0, 0.5])]
    assert [(e["t"], e["groups"]) for e in of(events, "batch_dispatch")] == [
        (18.5, [0, 1]), (38.5, [2])]  # generate's end
    assert [e["t"] for e in of(events, "train_start")] == [18.5, 38.5]
    assert [e["t"] for e in of(events, "train_end")] == [27.5, 47.5]
    # published at the next step's model_update end; the last step at its train's end
    assert [(e["t"], e["version"]) for e in of(events, "weights_published")] == [
        (29.5, 2), (47.5, 3)]
    assert all(e["response_tokens"] == 0 for e in of(events, "request_finish"))
    assert any("token counts" in lack for lack in head["import"]["lacks"])


def test_roll_round_metrics_by_hand() -> None:
    rows = round_metrics(to_trace(read("roll", [FIXTURE])))
    first, second = rows
    assert first["rollout_complete_s"] == 17.0 and second["rollout_complete_s"] == 7.0
    assert first["trainer_compute_s"] == 9.0 and second["trainer_compute_s"] == 9.0
    assert first["rollout_to_train_end_s"] == 27.5 and second["rollout_to_train_end_s"] == 17.0
    assert first["first_dispatch_s"] == 18.5 and second["first_dispatch_s"] == 8.0
    # max(t_U + C, t_last + c_last): 17.0 + 9.0; 7.0 + 9.0
    assert first["lower_bound_s"] == 26.0 and second["lower_bound_s"] == 16.0
    assert first["efficiency"] == pytest.approx(26.0 / 27.5)


def _lines() -> list[dict[str, Any]]:
    text = (FIXTURE / "traces" / "traces.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def _spans(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return doc["resourceSpans"][0]["scopeSpans"][0]["spans"]


def _without(name: str) -> list[dict[str, Any]]:
    lines = _lines()
    for doc in lines:
        doc["resourceSpans"][0]["scopeSpans"][0]["spans"] = [
            s for s in _spans(doc) if s["name"] != name]
    return lines


def _edit(span_id: str, **fields: Any) -> list[dict[str, Any]]:
    lines = _lines()
    for doc in lines:
        for span in _spans(doc):
            if span["spanId"] == span_id:
                span.update(fields)
                for key in [k for k, v in fields.items() if v is None]:
                    del span[key]
    return lines


BAD = {
    "no steps": (_without("pipeline_step"), "no 'pipeline_step' spans: not a ROLL pipeline"),
    "no requests": (_without("rollout.generate"),
                    "no 'rollout.generate' span ending in a 'rollout.compute_rewards'"),
    "a request under no step": (_without("get_batch"),
                                "span 'rollout.generate' is under no 'pipeline_step' span"),
    "a request without its prompt": (_edit("a000000000000012", attributes=[]),
                                      "span 'rollout.generate' lacks attribute 'prompt_id'"),
    "a time that is not a number": (_edit("a000000000000021", startTimeUnixNano="soon"),
                                    "field 'startTimeUnixNano' must be an integer, got 'soon'"),
    "a span without its id": (_edit("a000000000000021", spanId=None),
                              "spans[4]: missing field 'spanId'"),
    "a step without its number": (_edit("d000000000000001", attributes=[]),
                                  "span 'pipeline_step' lacks attribute 'global_step'"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_roll_input_is_one_line_exit_2_and_no_trace(tmp_path: Path, case: str) -> None:
    lines, message = BAD[case]
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "traces.jsonl").write_text("".join(json.dumps(d) + "\n" for d in lines))
    with pytest.raises(SourceError) as err:
        read("roll", [tmp_path])
    assert message in str(err.value)
    out = tmp_path / "out.jsonl"
    done = CliRunner().invoke(app, ["import", "roll", str(tmp_path), "--out", str(out)])
    assert done.exit_code == 2 and len(done.output.strip().splitlines()) == 1, done.output
    assert message in done.output.replace("\n", "") and not out.exists()


def test_a_line_cut_short_is_named(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    text = (FIXTURE / "traces" / "traces.jsonl").read_text()
    path.write_text(text[: len(text) - 40])
    with pytest.raises(SourceError, match="traces.jsonl:4: the last line is cut short"):
        read("roll", [path])


def test_check_on_a_roll_import_leaves_length_bias_unjudged(tmp_path: Path) -> None:
    # every response counts 0 tokens: the length ratio was 0 / 0 (a ZeroDivisionError
    # traceback before), now "not checked", saying why
    trace = tmp_path / "roll.jsonl"
    assert CliRunner().invoke(app, ["import", "roll", str(FIXTURE), "--out",
                                    str(trace)]).exit_code == 0
    done = CliRunner().invoke(app, ["check", str(trace)])
    assert done.exception is None or isinstance(done.exception, SystemExit), done.output
    text = " ".join(done.output.split())
    assert "length bias not checked no response in the trace has a length" in text
    assert "staleness not checked ROLL records no policy versions" in text


def test_a_roll_import_has_no_lengths_to_replay_and_says_so(tmp_path: Path) -> None:
    # every response counts 0 tokens: a replay failed mid-run with the engine's
    # "nothing left to generate" (exit 1, a traceback, a trace left behind)
    trace = tmp_path / "roll.jsonl"
    done = CliRunner().invoke(app, ["import", "roll", str(FIXTURE), "--out", str(trace)])
    assert "nothing to replay" in done.output and "counterfactual" not in done.output
    run = CliRunner().invoke(app, ["run", "--workload", f"trace:{trace}", "--out",
                                   str(tmp_path / "o")])
    assert run.exit_code == 2, run.output
    assert "records no response lengths" in run.output and not (tmp_path / "o").exists()


def test_metrics_of_a_roll_import_say_what_is_not_recorded(tmp_path: Path) -> None:
    # it printed "0 trained tok/s ... mean lag nan steps (max nan), ESS nan"
    trace = tmp_path / "roll.jsonl"
    assert CliRunner().invoke(app, ["import", "roll", str(FIXTURE), "--out",
                                    str(trace)]).exit_code == 0
    text = " ".join(CliRunner().invoke(app, ["metrics", str(trace)]).output.split())
    assert "token counts not recorded; policy versions not recorded" in text
    assert "nan" not in text and "0 trained tok/s" not in text
