"""`rolloutbench import tinker`: tinker-cookbook's `trace_events.jsonl`
(tests/fixtures/tinker/trace_events.jsonl, made by hand as the cookbook's trace
collector writes it, harness/imports/tinker.py cites where) becomes a timed trace whose
rounds, groups and trainer are worked out here by hand.

The fixture, in seconds after perf_counter 5000 (t0 = 10.1, the first group): step 0's
`sampling` block runs 10.0-17.2 with two groups, 10.1-14.6 graded 14.0-14.5 and
10.2-17.1 graded 16.0-17.0 (a `sample_async` on another track is not a group); its
`train_step` runs 17.5-21.5 and `save_checkpoint_and_get_sampling_client` ends at 22.5.
Step 1's `sampling` runs 23.0-27.5 with one group, 23.1-27.0, whose grading was
skipped; `train_step` 27.8-30.0, the new sampler at 30.9."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.core.metrics import round_metrics
from harness.imports import SourceError, read, to_trace

FIXTURE = Path(__file__).parent / "fixtures" / "tinker"


def of(events: list[dict[str, Any]], ev: str) -> list[tuple[Any, ...]]:
    keys = {"request_submit": ("t", "group"), "request_finish": ("t", "group"),
            "group_materialized": ("t", "group", "verify_s"), "train_start": ("t",),
            "train_end": ("t",), "weights_published": ("t", "version"),
            "batch_dispatch": ("t", "groups"), "rollout_start": ("t", "round", "version")}[ev]
    return [tuple(e[k] for k in keys) for e in events if e["ev"] == ev]


def test_tinker_iterations_become_rounds_timed_by_hand() -> None:
    events = to_trace(read("tinker", [FIXTURE]))
    head = events[0]
    assert head["system"] == "tinker-sync" and head["import"]["source_rounds"] == [0, 1]
    assert head["config"]["group_size"] == 1 and head["import"]["timed"] is True
    assert of(events, "rollout_start") == [(0.0, 0, 0), (13.0, 1, 1)]
    assert of(events, "request_submit") == [(0.0, 0), (0.1, 1), (13.0, 2)]
    # a group's rollout ends where its grading starts (14.0, 16.0), else at its span's end
    assert of(events, "request_finish") == [(3.9, 0), (5.9, 1), (16.9, 2)]
    assert of(events, "group_materialized") == [(4.4, 0, [0.5]), (6.9, 1, [1.0]),
                                                 (16.9, 2, [0.0])]
    assert of(events, "batch_dispatch") == [(7.1, [0, 1]), (17.4, [2])]  # sampling's end
    assert of(events, "train_start") == [(7.4,), (17.7,)]
    assert of(events, "train_end") == [(11.4,), (19.9,)]
    assert of(events, "weights_published") == [(12.4, 1), (20.8, 2)]  # the new sampler


def test_tinker_round_metrics_by_hand() -> None:
    first, second = round_metrics(to_trace(read("tinker", [FIXTURE])))
    assert first["rollout_complete_s"] == pytest.approx(6.9)
    assert first["trainer_compute_s"] == pytest.approx(4.0)
    assert first["rollout_to_train_end_s"] == pytest.approx(11.4)
    assert first["lower_bound_s"] == pytest.approx(10.9)  # max(6.9 + 4.0, 6.9 + 4.0)
    assert second["rollout_complete_s"] == pytest.approx(3.9)
    assert second["trainer_compute_s"] == pytest.approx(2.2)
    assert second["lower_bound_s"] == pytest.approx(6.1)


def _lines() -> list[dict[str, Any]]:
    return [json.loads(x) for x in (FIXTURE / "trace_events.jsonl").read_text().splitlines()]


def _drop(name: str) -> list[dict[str, Any]]:
    return [e for e in _lines() if e["name"] != name]


def _edit(i: int, **fields: Any) -> list[dict[str, Any]]:
    lines = _lines()
    lines[i].update(fields)
    return lines


def _rename_end(name: str, to: str) -> list[dict[str, Any]]:
    lines = _lines()
    next(e for e in lines if e["name"] == name and e["ph"] == "E")["name"] = to
    return lines


def _step_args() -> list[dict[str, Any]]:
    lines = _lines()
    for e in lines:
        if e["ph"] == "E" and e["name"] == "do_train_step_and_get_sampling_client":
            e["args"].pop("step")
    return lines


BAD = {
    "no train steps (the async loop)": (_drop("do_train_step_and_get_sampling_client"),
                                        "not a do_sync_training trace (no train steps)"),
    "no sampling block": (_drop("sampling"), "follows no 'sampling' block on its track"),
    "no groups": (_drop("do_group_rollout_and_filter_constant_reward"),
                  "no 'do_group_rollout_and_filter_constant_reward' span within"),
    "no train_step": (_drop("train_step"), "step 0 holds no 'train_step'"),
    "a step without its number": (_step_args(), "lacks its 'step' (args.step)"),
    "an unknown phase": (_edit(0, ph="X"), "trace_events.jsonl:1: field 'ph' must be B, E"),
    "a time that is text": (_edit(0, ts="soon"), ":1: field 'ts' must be a number, got 'soon'"),
    "no track": (_edit(0, tid=None), ":1: field 'tid' must be an integer, got None"),
    "an E of another span": (_rename_end("sample_async", "train_step"),
                             "an 'E' of 'train_step', but the span open on its track is "
                             "'sample_async'"),
    "time going back (a resumed run)": (_lines() + _lines()[:1],
                                        "'ts' goes back on its track (a resumed run?)"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_tinker_input_is_one_line_exit_2_and_no_trace(tmp_path: Path, case: str) -> None:
    lines, message = BAD[case]
    path = tmp_path / "trace_events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in lines))
    with pytest.raises(SourceError) as err:
        read("tinker", [tmp_path])
    assert message in str(err.value)
    out = tmp_path / "out.jsonl"
    done = CliRunner().invoke(app, ["import", "tinker", str(tmp_path), "--out", str(out)])
    assert done.exit_code == 2 and len(done.output.strip().splitlines()) == 1, done.output
    assert message in done.output.replace("\n", "") and not out.exists()


def test_check_gives_why_a_property_was_not_checked_whole(tmp_path: Path) -> None:
    # the reason was cut at 100 columns, mid-word ("the import assumed the r...")
    trace = tmp_path / "t.jsonl"
    assert CliRunner().invoke(app, ["import", "tinker", str(FIXTURE), "--out",
                                    str(trace)]).exit_code == 0
    out = CliRunner().invoke(app, ["check", str(trace)]).output
    assert "..." not in out and max(map(len, out.splitlines())) <= 100
    assert "(the import assumed the round's)" in " ".join(out.split())


def test_a_trace_without_token_counts_ranks_by_none_not_zero(tmp_path: Path) -> None:
    """The trace carries no token counts (every response written as 0): the figures
    systems are ranked by are not recorded (null, '-'), not 0 tok/s beside a run that
    counts them. Its samples a second are its own: 3 samples over 0.0-19.9 s (2 steps)."""
    from harness.core.yardstick import delivered

    fig = delivered(to_trace(read("tinker", [FIXTURE])))
    assert fig["trained_tokens_per_s"] != fig["trained_tokens_per_s"]  # NaN
    assert fig["generated_tokens_per_s"] != fig["generated_tokens_per_s"]
    assert fig["trained_samples_per_s"] == pytest.approx(3 / 19.9)
    trace = tmp_path / "tinker.jsonl.zst"
    assert CliRunner().invoke(app, ["import", "tinker", str(FIXTURE), "--out",
                                    str(trace)]).exit_code == 0
    rows = json.loads(CliRunner().invoke(app, ["metrics", str(trace), "--json"]).stdout)
    assert all(r["trained_tokens_per_s"] is None and r["generated_tokens_per_s"] is None
               for r in rows)
    table = CliRunner().invoke(app, ["compare", str(trace), str(trace)]).stdout
    (line,) = [ln for ln in table.splitlines() if "trained_tokens_per_s" in ln]
    assert line.split()[1:] == ["-", "-", "-", "-"]
