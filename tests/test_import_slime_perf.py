"""`rolloutbench import slime-perf`: slime's `perf/*` keys from its W&B history become a
timed trace of rounds and trainer, worked out here by hand; a simulated slime run
written as those keys comes back with the same round metrics.

The hand-made history (seconds; the clock starts where step 0's wait does):
step 0: update_weights 1.0 (the push before the loop), rollout 10.0, train_wait 14.0,
train 5.0: pushed 0-1, rollout 1-11, training 14-19.
step 1: save_model 0.5, update_weights 1.5, rollout 8.0, train_wait 12.0, train 4.0:
pushed 19-21, rollout 21-29, training 31-35.
step 2: update_weights 2.0, rollout 6.0, train_wait 9.0, train 3.0: pushed 35-37,
rollout 37-43, training 44-47; its own push is logged nowhere (published at 47).
The trace's t = 0 is the first rollout's start (1.0 here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.core.config import RunConfig
from harness.core.metrics import round_metrics
from harness.core.trace import read_trace
from harness.imports import SourceError, read, to_trace
from harness.run.execute import execute
from tests import source_formats as fmt

STEPS = {0: {"update_weights": 1.0, "rollout": 10.0, "train_wait": 14.0, "train": 5.0,
             "log_probs": 1.0, "actor_train": 3.5},
         1: {"save_model": 0.5, "update_weights": 1.5, "rollout": 8.0, "train_wait": 12.0,
             "train": 4.0},
         2: {"update_weights": 2.0, "rollout": 6.0, "train_wait": 9.0, "train": 3.0}}


def times(events: list[dict[str, Any]], ev: str) -> list[float]:
    return [e["t"] for e in events if e["ev"] == ev]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_perf_keys_become_rounds_timed_by_hand(tmp_path: Path, suffix: str) -> None:
    path = fmt.slime_perf(tmp_path / f"history{suffix}", STEPS)
    events = to_trace(read("slime-perf", [path]))
    head = events[0]
    assert head["system"] == "slime" and head["workload"] == "import:slime-perf"
    assert head["import"]["timed"] is True and head["import"]["source_rounds"] == [0, 1, 2]
    assert head["config"]["rounds"] == 3 and head["config"]["group_size"] == 1
    assert times(events, "rollout_start") == [0.0, 20.0, 36.0]
    assert times(events, "rollout_complete") == [10.0, 28.0, 42.0]
    assert times(events, "batch_dispatch") == [10.0, 28.0, 42.0]
    assert times(events, "train_start") == [13.0, 30.0, 43.0]
    assert times(events, "train_end") == [18.0, 34.0, 46.0]
    # the next step's push ends (save_model then update_weights); the last: unlogged
    assert [(e["t"], e["version"]) for e in events if e["ev"] == "weights_published"] == [
        (20.0, 1), (36.0, 2), (46.0, 3)]
    assert all(e["response_tokens"] == 0 for e in events if e["ev"] == "request_finish")


def test_round_metrics_by_hand(tmp_path: Path) -> None:
    rows = round_metrics(to_trace(read("slime-perf", [fmt.slime_perf(
        tmp_path / "h.jsonl", STEPS)])))
    assert [r["rollout_complete_s"] for r in rows] == [10.0, 8.0, 6.0]
    assert [r["trainer_compute_s"] for r in rows] == [5.0, 4.0, 3.0]
    assert [r["rollout_to_train_end_s"] for r in rows] == [18.0, 14.0, 10.0]
    # waiting: the round's time the trainer did not compute, (18 - 5) / 18
    assert rows[0]["waiting_ratio"] == pytest.approx(13.0 / 18.0)
    # max(t_U + C, ...): the rollout's end plus the training, 10 + 5, 8 + 4, 6 + 3
    assert [r["lower_bound_s"] for r in rows] == [15.0, 12.0, 9.0]


def as_perf(events: list[dict[str, Any]]) -> dict[int, dict[str, float]]:
    """A simulated synchronous run's rounds as slime would log them: the training block
    is train_start to train_end (the optimizer's step and the weight sync after it are
    the next round's update_weights, logged with the round it serves), the wait runs
    from the last block's end (the run's start for the first)."""
    at: dict[str, list[float]] = {}
    for e in events:
        at.setdefault(e["ev"], []).append(e["t"])
    out: dict[int, dict[str, float]] = {}
    last_end = 0.0
    for r, (start, done, t_start, t_end) in enumerate(zip(
            at["rollout_start"], at["rollout_complete"], at["train_start"], at["train_end"],
            strict=True)):
        out[r] = {"update_weights": start - last_end, "rollout": done - start,
                  "train_wait": t_start - last_end, "train": t_end - t_start}
        last_end = t_end
    return out


def test_a_simulated_slime_run_written_as_perf_keys_comes_back(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl.zst"
    execute(RunConfig(system="slime", workload="sci-jl", groups=4, group_size=2,
                      update_groups=4, rounds=3, seed=5).validate(), trace)
    before = read_trace(trace, strict=True)
    history = fmt.slime_perf(tmp_path / "history.csv", as_perf(before))
    back = tmp_path / "back.jsonl"
    done = CliRunner().invoke(app, ["import", "slime-perf", str(history), "--out", str(back)])
    assert done.exit_code == 0, done.output
    assert "next: rolloutbench metrics" in done.output
    after = read_trace(back, strict=True)
    keys = ("rollout_to_train_end_s", "first_dispatch_s", "rollout_complete_s",
            "trainer_compute_s", "waiting_ratio", "start_wait_ratio", "lower_bound_s",
            "efficiency")
    rows, again = round_metrics(before), round_metrics(after)
    assert len(rows) == len(again) == 3
    for row, other in zip(rows, again, strict=True):
        assert {k: other[k] for k in keys} == pytest.approx({k: row[k] for k in keys},
                                                            abs=1e-5)
    # each round starts where the simulated one did (the sim's t = 0 is the first's)
    assert times(after, "rollout_start") == pytest.approx(times(before, "rollout_start"),
                                                          abs=1e-5)


def _history(tmp_path: Path, rows: list[dict[str, Any]] | None = None, text: str | None = None
             ) -> Path:
    path = tmp_path / "history.jsonl"
    if text is None:
        text = "".join(json.dumps(r) + "\n" for r in (rows or []))
    path.write_text(text)
    return path


def _rows(tmp_path: Path) -> list[dict[str, Any]]:
    src = fmt.slime_perf(tmp_path / "src" / "h.jsonl", STEPS)
    return [json.loads(line) for line in src.read_text().splitlines()]


def _edited(tmp_path: Path, index: int, **fields: Any) -> Path:
    rows = _rows(tmp_path)
    rows[index].update(fields)
    for key in [k for k, v in fields.items() if v is None]:
        del rows[index][key]
    return _history(tmp_path, rows)


# row 0 is the eval row; per step, the rollout's row then the actor's: step 0's are
# lines 2-3, step 1's lines 4-5, step 2's lines 6-7
BAD = {
    "not JSON": (lambda p: _history(p, text="{oops\n"), "history.jsonl:1: not a JSON value"),
    "a line cut short": (lambda p: _history(p, text='{"rollout/step": 0}\n{"rollout/st'),
                         "history.jsonl:2: the last line is cut short"),
    "a row that is a list": (lambda p: _history(p, text="[1, 2]\n"),
                             "history.jsonl:1: expected an object (a W&B history row)"),
    "no trainer row": (lambda p: _history(p, [{"rollout/step": 0, "perf/rollout_time": 1.0}]),
                       "no step with perf/train_time and rollout/step: not slime W&B history"),
    "a step as text": (lambda p: _edited(p, 3, **{"rollout/step": "one"}),
                       "history.jsonl:4: field 'rollout/step' must be a whole number >= 0, "
                       "got 'one'"),
    "a time as text": (lambda p: _edited(p, 4, **{"perf/train_time": "4s"}),
                       "history.jsonl:5: field 'perf/train_time' must be seconds (a number "
                       ">= 0), got '4s'"),
    "a negative time": (lambda p: _edited(p, 3, **{"perf/rollout_time": -8.0}),
                        "history.jsonl:4: field 'perf/rollout_time' must be seconds"),
    "a step missing (a sampled history)": (lambda p: _edited(p, 4, **{"perf/train_time": None}),
                                           "step 1 lacks perf/train_time: use "
                                           "scan_history"),
    "a step without its rollout": (lambda p: _edited(p, 3, **{"perf/rollout_time": None}),
                                   "history.jsonl:5: step 1 has no perf/rollout_time"),
    "a rollout that fits neither loop": (  # train.py: 37 + 14 > 44; async: 31 + 14 > 44
        lambda p: _edited(p, 5, **{"perf/rollout_time": 14.0}),
        "history.jsonl:7: step 2's rollout ends 7.000 s after its data was fetched (train.py's "
        "loop; train_async.py's fits no better)"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_history_is_one_line_exit_2_and_no_trace(tmp_path: Path, case: str) -> None:
    make, message = BAD[case]
    path = make(tmp_path)
    with pytest.raises(SourceError) as err:
        read("slime-perf", [path])
    assert message in str(err.value)
    out = tmp_path / "out.jsonl"
    done = CliRunner().invoke(app, ["import", "slime-perf", str(path), "--out", str(out)])
    assert done.exit_code == 2 and len(done.output.strip().splitlines()) == 1, done.output
    assert message in done.output.replace("\n", "") and not out.exists()


@pytest.mark.parametrize(("text", "message"), [
    ("", "history.csv: empty (a CSV export starts with its header of keys)"),
    ("rollout/step,perf/train_time\n0.0,1.0,2.0\n", "history.csv:2: 3 cells, the header has 2"),
    ("rollout/step,perf/train_time\n0.5,1.0\n",
     "history.csv:2: field 'rollout/step' must be a whole number >= 0, got 0.5"),
])
def test_bad_csv_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "history.csv"
    path.write_text(text)
    out = tmp_path / "out.jsonl"
    done = CliRunner().invoke(app, ["import", "slime-perf", str(path), "--out", str(out)])
    assert done.exit_code == 2 and len(done.output.strip().splitlines()) == 1, done.output
    assert message in done.output.replace("\n", "") and not out.exists()


def test_a_folder_holds_one_history_and_other_files_are_refused(tmp_path: Path) -> None:
    fmt.slime_perf(tmp_path / "a.jsonl", STEPS)
    assert read("slime-perf", [tmp_path]).files == [str(tmp_path / "a.jsonl")]
    fmt.slime_perf(tmp_path / "b.csv", STEPS)
    with pytest.raises(SourceError, match=f"^{tmp_path}: 2 files; slime-perf reads one W&B "
                       "history file$"):
        read("slime-perf", [tmp_path])
    other = tmp_path / "h.txt"
    other.write_text("x")
    with pytest.raises(SourceError, match=r"h\.txt: a W&B history export is \.jsonl"):
        read("slime-perf", [other])


def test_check_says_what_the_history_cannot_judge(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    history = fmt.slime_perf(tmp_path / "h.jsonl", STEPS)
    assert CliRunner().invoke(app, ["import", "slime-perf", str(history), "--out",
                                    str(trace)]).exit_code == 0
    out = " ".join(CliRunner().invoke(app, ["check", str(trace)]).stdout.split())
    assert "slime's W&B history records no policy versions" in out


def test_rows_as_pandas_gives_them_read_the_same(tmp_path: Path) -> None:
    # json.dumps of a frame's records: NaN for a key a row lacks (strict JSON has none);
    # a spreadsheet's CSV starts with a byte-order mark
    rows = _rows(tmp_path)
    keys = list(dict.fromkeys(k for row in rows for k in row))
    path = tmp_path / "nan.jsonl"
    path.write_text("".join(json.dumps({k: row.get(k, float("nan")) for k in keys}) + "\n"
                            for row in rows))
    assert "NaN" in path.read_text()
    want = to_trace(read("slime-perf", [fmt.slime_perf(tmp_path / "h.jsonl", STEPS)]))[1:]
    assert to_trace(read("slime-perf", [path]))[1:] == want
    step_first = ["rollout/step", *(k for k in keys if k != "rollout/step")]
    csv_path = tmp_path / "h.csv"
    csv_path.write_bytes(b"\xef\xbb\xbf" + "".join(
        ",".join(str(row.get(k, "")) for k in key_row) + "\n"
        for key_row, row in [(step_first, dict(zip(step_first, step_first, strict=True))),
                             *((step_first, r) for r in rows)]).encode())
    assert to_trace(read("slime-perf", [csv_path]))[1:] == want


def test_steps_counted_in_optimizer_steps_are_rollouts(tmp_path: Path) -> None:
    # --wandb-always-use-train-step logs rollout_id x 64 / 16 = 0, 4, 8: no step is missing
    path = fmt.slime_perf(tmp_path / "h.jsonl", {4 * s: keys for s, keys in STEPS.items()})
    source = read("slime-perf", [path])
    assert "rollout/step advances by 4" in " ".join(source.notes)
    events = to_trace(source)
    assert events[0]["import"]["source_rounds"] == [0, 4, 8]
    assert times(events, "train_end") == [18.0, 34.0, 46.0]  # as for 0, 1, 2
    # strides that differ, or two steps only: a gap, refused (one rollout a step)
    for steps, gaps in (((0, 8, 12), 10), ((0, 4, 8, 16), 13), ((0, 4), 3)):  # a stride of 1
        rows = [*STEPS.values(), STEPS[2]][: len(steps)]
        history = fmt.slime_perf(tmp_path / "g.jsonl", dict(zip(steps, rows, strict=True)))
        with pytest.raises(SourceError, match=rf": {gaps} steps lack perf/train_time"):
            read("slime-perf", [history])


# train_async.py: step 1's push and rollout (1 + 8 s) do not fit in its wait (4 s), so
# each rollout runs while the step before trains. Clock: step 0 pushed 0-1, rollout
# 1-11, data fetched 11.5-12, training 12-17; step 1's rollout launched at 11.5 (as step
# 0 began), 11.5-19.5, training 21-25; step 2's launched at 20.5, 20.5-26.5, training
# 28-31. A push waits for the next rollout: max(17, 19.5) + 1 = 20.5, max(25, 26.5) + 1
# = 27.5. t = 0 at 1.0.
ASYNC = {0: {"update_weights": 1.0, "rollout": 10.0, "train_wait": 12.0, "train": 5.0,
             "data_preprocess": 0.5},
         1: {"update_weights": 1.0, "rollout": 8.0, "train_wait": 4.0, "train": 4.0,
             "data_preprocess": 0.5},
         2: {"update_weights": 1.0, "rollout": 6.0, "train_wait": 3.0, "train": 3.0}}


def test_train_async_histories_overlap_rollout_and_training_by_hand(tmp_path: Path) -> None:
    source = read("slime-perf", [fmt.slime_perf(tmp_path / "h.jsonl", ASYNC)])
    assert "train_async.py's loop" in " ".join(source.notes)
    events = to_trace(source)
    assert times(events, "rollout_start") == [0.0, 10.5, 19.5]
    assert times(events, "rollout_complete") == [10.0, 18.5, 25.5]
    assert times(events, "train_start") == [11.0, 20.0, 27.0]
    assert times(events, "train_end") == [16.0, 24.0, 30.0]
    assert times(events, "weights_published") == [19.5, 26.5, 30.0]
    rows = round_metrics(events)
    assert [r["rollout_to_train_end_s"] for r in rows] == [16.0, 13.5, 10.5]


def as_async_perf(events: list[dict[str, Any]]) -> dict[int, dict[str, float]]:
    """A one-step-off run's rounds as train_async.py's slime would log them: round N+1's
    rollout launched as round N fetches its data (data_preprocess: from that launch to
    the training's start), the push after round N (logged with N+1) from the later of
    its training's end and round N+1's rollout to round N+1's training."""
    at: dict[str, list[float]] = {}
    for e in events:
        at.setdefault(e["ev"], []).append(e["t"])
    starts, done = at["rollout_start"], at["rollout_complete"]
    t_start, t_end = at["train_start"], at["train_end"]
    out: dict[int, dict[str, float]] = {}
    for r in range(len(starts)):
        before = t_end[r - 1] if r else 0.0
        out[r] = {"update_weights": t_start[r] - max(before, done[r]) if r else starts[0],
                  "rollout": done[r] - starts[r], "train_wait": t_start[r] - before,
                  "train": t_end[r] - t_start[r],
                  "data_preprocess": t_start[r] - starts[r + 1] if r + 1 < len(starts)
                  else 0.0}
    return out


def test_a_simulated_one_step_off_run_comes_back_as_train_async(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl.zst"
    execute(RunConfig(system="verl-one-step-off", workload="sci-jl", groups=4, group_size=2,
                      update_groups=4, rounds=3, seed=5).validate(), trace)
    before = read_trace(trace, strict=True)
    source = read("slime-perf", [fmt.slime_perf(tmp_path / "h.jsonl", as_async_perf(before))])
    assert "train_async.py's loop" in " ".join(source.notes)
    keys = ("rollout_to_train_end_s", "first_dispatch_s", "rollout_complete_s",
            "trainer_compute_s", "waiting_ratio", "start_wait_ratio", "lower_bound_s",
            "efficiency")
    rows, again = round_metrics(before), round_metrics(to_trace(source))
    assert len(rows) == len(again) == 3
    for row, other in zip(rows, again, strict=True):
        assert {k: other[k] for k in keys} == pytest.approx({k: row[k] for k in keys},
                                                            abs=1e-5)


def test_token_figures_are_unknown_not_zero(tmp_path: Path) -> None:
    """slime's perf keys count no tokens: the per-round table showed resp tok 0.00 and gen
    tok/s 0.00 as measurements (the yardstick line below it says "token counts not
    recorded"); they are unknown, `-` in the table, the times kept."""
    import math

    path = fmt.slime_perf(tmp_path / "h.jsonl", STEPS)
    rows = round_metrics(to_trace(read("slime-perf", [path])))
    for key in ("mean_response_tokens", "rollout_tokens_per_s", "batch_tokens_per_s"):
        assert all(math.isnan(r[key]) for r in rows), key
    assert [r["rollout_complete_s"] for r in rows] == [10.0, 8.0, 6.0]
    out = tmp_path / "t.jsonl"
    assert CliRunner().invoke(app, ["import", "slime-perf", str(path), "-o", str(out)]
                              ).exit_code == 0
    done = CliRunner().invoke(app, ["metrics", str(out)], env={"COLUMNS": "100"})
    row = next(line.split() for line in done.output.splitlines() if line.split()[:1] == ["0"])
    assert row[:7] == ["0", "18.0", "10.0", "10.0", "5.00", "-", "-"], done.output


def test_a_rollout_with_no_training_after_it_is_said(tmp_path: Path) -> None:
    """A history cut after step 3's rollout row (a run stopped mid-step) imported as 3
    rounds with no word of step 3's rollout; now a note says it was left out."""
    path = fmt.slime_perf(tmp_path / "h.jsonl", {**STEPS, 3: {"rollout": 7.0}})
    source = read("slime-perf", [path])
    assert sorted({s.round for s in source.samples}) == [0, 1, 2]
    assert ("step(s) 3: a rollout and no training logged after it (the run stopped "
            "mid-step?): left out") in source.notes
    assert not any("left out" in n for n in read("slime-perf", [fmt.slime_perf(
        tmp_path / "whole.jsonl", STEPS)]).notes)
