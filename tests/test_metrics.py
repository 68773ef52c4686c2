"""Per-round metrics on hand-built traces, checked against numbers worked out by hand.

Every expected value below is a literal with the arithmetic in a comment, so a
change in a definition (or an off-by-one in attribution) shows up as a failure.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.core.config import RunConfig
from harness.core.metrics import KEYS, metrics_for_traces, round_metrics
from harness.core.runtime import Request, Runtime
from harness.core.trace import read_trace
from harness.sim.runtime import SimRuntime

NAN = float("nan")
ROLLOUTBENCH = str(Path(sys.executable).parent / "rolloutbench")

# -- tiny event builders ------------------------------------------------------


def head() -> dict[str, Any]:
    return {"t": 0.0, "ev": "run_start", "schema": 1, "system": "hand", "workload": "toy",
            "runtime": "hand", "seed": 0, "config": {}, "version": "0"}


def ev(t: float, kind: str, **fields: Any) -> dict[str, Any]:
    return {"t": t, "ev": kind, **fields}


def submit(t: float, rnd: int, group: int, sample: int, **extra: Any) -> dict[str, Any]:
    return ev(t, "request_submit", round=rnd, group=group, sample=sample, prompt_tokens=10,
              **extra)


def finish(t: float, group: int, sample: int, tokens: int, version: int,
           status: str = "finished") -> dict[str, Any]:
    return ev(t, "request_finish", group=group, sample=sample, response_tokens=tokens,
              status=status, versions=[version, version])


def write(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def three_rounds() -> list[dict[str, Any]]:
    """R=4 groups of K=2 per round, U=2. Round 0 and 1 train two batches each;
    round 2 is cut short: it has requests but no batch. No batch_dispatch carries
    a round, so metrics must attribute batches by dispatch time."""
    e = [head(), ev(0.0, "rollout_start", round=0, version=0)]
    # ---- round 0, t0 = 0, groups 0..3 ----
    e += [submit(0.0, 0, g, s) for g in range(4) for s in range(2)]
    e += [
        finish(1.0, 0, 0, 100, 0),
        finish(2.0, 0, 1, 300, 0), ev(2.0, "group_complete", group=0),
        ev(2.5, "group_materialized", group=0),
        finish(3.0, 1, 0, 200, 0),
        finish(4.0, 1, 1, 400, 0), ev(4.0, "group_complete", group=1),
        ev(4.5, "group_materialized", group=1),
        ev(4.5, "batch_dispatch", batch=0, groups=[0, 1]),
        ev(4.5, "train_start", batch=0),
        finish(5.0, 2, 0, 500, 0),
        finish(6.0, 2, 1, 100, 0), ev(6.0, "group_complete", group=2),
        ev(6.5, "group_materialized", group=2),
        finish(7.0, 3, 0, 300, 0),
        ev(7.5, "train_end", batch=0), ev(7.5, "optimizer_step", step=1, version=1),
        finish(8.0, 3, 1, 500, 0), ev(8.0, "group_complete", group=3),
        ev(8.0, "group_materialized", group=3),
        ev(8.0, "rollout_complete", round=0),
        ev(8.0, "batch_dispatch", batch=1, groups=[2, 3]),
        # batch 1 is trained in two spans: 8.0-10.0 and 10.5-12.5
        ev(8.0, "train_start", batch=1), ev(10.0, "train_end", batch=1),
        ev(10.5, "train_start", batch=1), ev(12.5, "train_end", batch=1),
        ev(12.5, "optimizer_step", step=2, version=2),
        ev(12.8, "weights_published", version=2),
    ]
    # ---- round 1, t0 = 13, groups 4..7 ----
    e.append(ev(13.0, "rollout_start", round=1, version=2))
    e += [submit(13.0, 1, g, s) for g in range(4, 8) for s in range(2)]
    e += [
        finish(14.0, 4, 0, 100, 2),
        finish(15.0, 4, 1, 200, 2), ev(15.0, "group_complete", group=4),
        ev(15.5, "group_materialized", group=4),
        finish(16.0, 5, 0, 300, 2),
        finish(17.0, 5, 1, 400, 2), ev(17.0, "group_complete", group=5),
        ev(18.0, "group_materialized", group=5),
        ev(18.0, "batch_dispatch", batch=2, groups=[4, 5]),
        finish(18.5, 6, 0, 100, 2), ev(18.5, "train_start", batch=2),
        finish(19.0, 6, 1, 300, 2), ev(19.0, "group_complete", group=6),
        ev(19.5, "group_materialized", group=6),
        finish(20.0, 7, 0, 1400, 2),
        finish(20.5, 7, 1, 140, 2, status="aborted"), ev(20.5, "group_complete", group=7),
        ev(21.0, "group_materialized", group=7),
        ev(21.0, "rollout_complete", round=1),
        ev(24.5, "train_end", batch=2), ev(24.5, "optimizer_step", step=3, version=3),
        ev(24.5, "batch_dispatch", batch=3, groups=[6, 7]),
        ev(25.0, "train_start", batch=3), ev(26.0, "train_end", batch=3),
        ev(26.0, "optimizer_step", step=4, version=4),
        ev(26.5, "weights_published", version=4),
    ]
    # ---- round 2, t0 = 27, one group, never trained ----
    e += [
        ev(27.0, "rollout_start", round=2, version=4),
        submit(27.0, 2, 8, 0), submit(27.0, 2, 8, 1),
        finish(28.0, 8, 0, 10, 4),
        finish(30.0, 8, 1, 30, 4), ev(30.0, "group_complete", group=8),
        ev(30.5, "group_materialized", group=8),
        ev(31.0, "rollout_complete", round=2),
        ev(31.0, "run_end"),
    ]
    return e


EXPECTED: list[dict[str, float]] = [
    {  # round 0, t0 = 0
        "rollout_to_train_end_s": 12.5,  # last train_end 12.5 - 0
        "first_dispatch_s": 4.5,  # batch 0 dispatched at 4.5
        "rollout_complete_s": 8.0,  # rollout_complete at 8.0
        "trainer_compute_s": 7.0,  # (7.5-4.5) + (10-8) + (12.5-10.5) = 3 + 2 + 2
        "mean_response_tokens": 300.0,  # (100+300+200+400+500+100+300+500) / 8 = 2400 / 8
        "rollout_tokens_per_s": 300.0,  # 2400 tokens / 8 s
        "waiting_ratio": 0.44,  # (12.5 - 7) / 12.5
        "start_wait_ratio": 0.36,  # (first train_start 4.5 - 0) / 12.5
        # U = 2; materialised 2.5, 4.5, 6.5, 8.0 -> t_U = 4.5, t_last = 8.0 (batch 1, c = 4)
        "lower_bound_s": 12.0,  # max(4.5 + 7, 8.0 + 4) = max(11.5, 12)
        "efficiency": 0.96,  # 12 / 12.5
    },
    {  # round 1, t0 = 13
        "rollout_to_train_end_s": 13.0,  # 26 - 13
        "first_dispatch_s": 5.0,  # 18 - 13
        "rollout_complete_s": 8.0,  # 21 - 13
        "trainer_compute_s": 7.0,  # (24.5-18.5) + (26-25) = 6 + 1
        # finished only: (100+200+300+400+100+300+1400) / 7 = 2800 / 7
        "mean_response_tokens": 400.0,
        "rollout_tokens_per_s": 367.5,  # (2800 finished + 140 aborted) / 8 s = 2940 / 8
        "waiting_ratio": 6 / 13,  # (13 - 7) / 13 = 0.4615...
        "start_wait_ratio": 5.5 / 13,  # (18.5 - 13) / 13 = 0.4230...
        # materialised (rel.) 2.5, 5.0, 6.5, 8.0 -> t_U = 5.0; t_last = 8.0 in batch 3 (c = 1)
        "lower_bound_s": 12.0,  # max(5 + 7, 8 + 1) = max(12, 9)
        "efficiency": 12 / 13,  # 0.923...
    },
    {  # round 2, t0 = 27: no batch
        "rollout_to_train_end_s": NAN,
        "first_dispatch_s": NAN,
        "rollout_complete_s": 4.0,  # 31 - 27
        "trainer_compute_s": 0.0,  # no spans
        "mean_response_tokens": 20.0,  # (10 + 30) / 2
        "rollout_tokens_per_s": 10.0,  # 40 / 4
        "waiting_ratio": NAN,
        "start_wait_ratio": NAN,
        "lower_bound_s": NAN,
        "efficiency": NAN,
    },
]


def assert_row(row: dict[str, Any], expected: dict[str, float]) -> None:
    for key in KEYS:
        want, got = expected[key], row[key]
        if math.isnan(want):
            assert got is None or math.isnan(got), f"{key}: expected NaN, got {got}"
        else:
            assert got == pytest.approx(want, abs=1e-9), f"{key}: expected {want}, got {got}"


# -- tests ---------------------------------------------------------------------


def test_keys_are_the_documented_ones() -> None:
    assert set(EXPECTED[0]) == set(KEYS)
    assert len(KEYS) == 10


def test_three_rounds_by_hand() -> None:
    rows = round_metrics(three_rounds())
    assert [r["round"] for r in rows] == [0, 1, 2]
    assert all(r["system"] == "hand" and r["workload"] == "toy" for r in rows)
    for row, expected in zip(rows, EXPECTED, strict=True):
        assert_row(row, expected)


def test_same_numbers_from_a_trace_file(tmp_path: Path) -> None:
    path = write(tmp_path / "hand.jsonl", three_rounds())
    assert read_trace(path) == three_rounds()
    rows = metrics_for_traces([str(path), str(path)])
    assert len(rows) == 6  # two files, three rounds each
    for row, expected in zip(rows, EXPECTED * 2, strict=True):
        assert_row(row, expected)


def test_batch_belongs_to_the_round_it_was_dispatched_in() -> None:
    """A pipelined trace: batch 1 holds a round-0 group but is dispatched after
    round 1 started, so it counts for round 1 (the module docstring's rule)."""
    e = [
        head(), ev(0.0, "rollout_start", round=0, version=0),
        submit(0.0, 0, 0, 0), submit(0.0, 0, 1, 0),
        finish(1.0, 0, 0, 10, 0), ev(1.0, "group_materialized", group=0),
        ev(1.0, "batch_dispatch", batch=0, groups=[0]),
        ev(1.0, "train_start", batch=0),
        finish(2.0, 1, 0, 10, 0), ev(2.0, "group_materialized", group=1),
        ev(2.0, "rollout_complete", round=0),
        ev(3.0, "train_end", batch=0),
        ev(4.0, "rollout_start", round=1, version=0), submit(4.0, 1, 2, 0),
        ev(5.0, "batch_dispatch", batch=1, groups=[1]),
        ev(5.0, "train_start", batch=1), ev(6.0, "train_end", batch=1),
        finish(6.0, 2, 0, 10, 0), ev(6.0, "group_materialized", group=2),
        ev(6.0, "rollout_complete", round=1),
        ev(7.0, "batch_dispatch", batch=2, groups=[2]),
        ev(7.0, "train_start", batch=2), ev(9.0, "train_end", batch=2),
    ]
    r0, r1 = round_metrics(e)
    assert r0["first_dispatch_s"] == 1.0  # batch 0 at 1.0
    assert r0["trainer_compute_s"] == 2.0  # batch 0 only: 3 - 1
    assert r0["rollout_to_train_end_s"] == 3.0  # batch 0 ends at 3
    assert r0["waiting_ratio"] == pytest.approx(1 / 3)  # (3 - 2) / 3
    assert r1["first_dispatch_s"] == 1.0  # batch 1 at 5.0 - 4.0
    assert r1["trainer_compute_s"] == 3.0  # (6 - 5) + (9 - 7)
    assert r1["rollout_to_train_end_s"] == 5.0  # 9 - 4
    assert r1["waiting_ratio"] == pytest.approx(0.4)  # (5 - 3) / 5
    assert r1["start_wait_ratio"] == pytest.approx(0.2)  # (5 - 4) / 5


def test_round_without_rollout_complete_has_nan_rollout_times() -> None:
    e = [head(), ev(0.0, "rollout_start", round=0, version=0), submit(0.0, 0, 0, 0),
         finish(2.0, 0, 0, 50, 0)]
    (row,) = round_metrics(e)
    assert math.isnan(row["rollout_complete_s"])
    assert math.isnan(row["rollout_tokens_per_s"])
    assert row["mean_response_tokens"] == 50.0


def test_efficiency_is_at_most_one_on_the_hand_trace() -> None:
    for row in round_metrics(three_rounds())[:2]:
        assert 0 < row["efficiency"] <= 1
        assert row["lower_bound_s"] <= row["rollout_to_train_end_s"]


def test_cli_metrics_json(tmp_path: Path) -> None:
    path = write(tmp_path / "hand.jsonl", three_rounds())
    out = subprocess.run([ROLLOUTBENCH, "metrics", str(path), "--json"], capture_output=True,
                         text=True, stdin=subprocess.DEVNULL, check=False)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert isinstance(rows, list) and len(rows) == 3
    for rnd, (row, expected) in enumerate(zip(rows, EXPECTED, strict=True)):
        assert {"system", "workload", "round", *KEYS} <= set(row)
        assert (row["system"], row["workload"], row["round"]) == ("hand", "toy", rnd)
        assert_row(row, expected)
    # NaN is not JSON: the round without batches reports null
    assert rows[2]["efficiency"] is None and rows[2]["lower_bound_s"] is None


def test_cli_metrics_reads_a_run_folder(tmp_path: Path) -> None:
    """`metrics OUT` said "OUT: cannot open (Is a directory)" where `compare OUT OUT`
    reads the folder's trace; now it reads it too (a live run's trace.jsonl here), and a
    folder without one names the trace it looked for."""
    (tmp_path / "run").mkdir()
    write(tmp_path / "run" / "trace.jsonl", three_rounds())
    by_folder, by_file = (subprocess.run([ROLLOUTBENCH, "metrics", str(p), "--json"],
                                         capture_output=True, text=True, check=False,
                                         stdin=subprocess.DEVNULL)
                          for p in (tmp_path / "run", tmp_path / "run" / "trace.jsonl"))
    assert by_folder.returncode == 0, by_folder.stderr
    assert json.loads(by_folder.stdout) == json.loads(by_file.stdout)
    (tmp_path / "empty").mkdir()
    none = subprocess.run([ROLLOUTBENCH, "metrics", str(tmp_path / "empty")],
                          capture_output=True, text=True, check=False)
    assert none.returncode == 2 and str(tmp_path / "empty" / "trace.jsonl.zst") in none.stderr


# -- resumed and resubmitted requests ------------------------------------------


def test_resumed_request_tokens_are_counted_once_hand_trace() -> None:
    """The engine writes `resumed_tokens` on the resubmission's request_submit
    (harness/sim/engine.py), and the finished response's `response_tokens`
    includes the resumed prefix."""
    e = [
        head(), ev(0.0, "rollout_start", round=0, version=0), submit(0.0, 0, 0, 0),
        finish(2.0, 0, 0, 40, 0, status="aborted"),
        submit(2.0, 0, 0, 0, resumed_tokens=40),
        finish(5.0, 0, 0, 100, 0),
        ev(5.0, "rollout_complete", round=0),
    ]
    (row,) = round_metrics(e)
    assert row["mean_response_tokens"] == 100.0  # the one finished response
    # generated: 40 before the abort + (100 - 40) after the resume = 100 tokens in 5 s
    assert row["rollout_tokens_per_s"] == pytest.approx(20.0)


class _AbortAndResume:
    """A minimal system that aborts one request half way and resumes it."""

    name = "abort-resume"

    async def run(self, rt: Runtime) -> None:
        rt.emit("rollout_start", round=0, version=rt.engine.version)
        (prompt,) = rt.workload.take(1)
        req = Request(0, rt.new_group_id(), 0, prompt, rt.config.max_response_tokens)
        first = rt.engine.submit(req)
        await rt.sleep(1.0)
        (partial,) = await rt.engine.abort([req.id])
        await first
        self.partial = partial.tokens
        again = Request(0, req.group, 0, prompt, req.max_tokens, resume=partial)
        self.final = (await rt.engine.submit(again)).tokens
        rt.emit("rollout_complete", round=0)


def test_resumed_request_tokens_are_counted_once_sim(tmp_path: Path) -> None:
    cfg = RunConfig(system="slime", workload="sci-jl", rounds=1, groups=2,
                    update_groups=1).validate()
    system = _AbortAndResume()
    path = tmp_path / "trace.jsonl"
    SimRuntime(cfg, path).run(system)
    assert 0 < system.partial < system.final  # the abort really cut the response
    (row,) = round_metrics(read_trace(path))
    # the engine generated `final` tokens in all (the resumed prefix only once)
    assert row["rollout_tokens_per_s"] == pytest.approx(system.final / row["rollout_complete_s"])


def test_request_belongs_to_the_round_named_in_its_submit() -> None:
    """The module docstring: 'a request belongs to the round named in its
    request_submit'. Sample 1 of group 0 is cut in round 0 and resubmitted,
    fresh, in round 1; its finish belongs to round 1."""
    e = [
        head(), ev(0.0, "rollout_start", round=0, version=0),
        submit(0.0, 0, 0, 0), submit(0.0, 0, 0, 1),
        finish(1.0, 0, 0, 100, 0), finish(2.0, 0, 1, 20, 0, status="aborted"),
        ev(2.0, "rollout_complete", round=0),
        ev(3.0, "rollout_start", round=1, version=0), submit(3.0, 1, 0, 1),
        finish(5.0, 0, 1, 300, 0),
        ev(5.0, "rollout_complete", round=1),
    ]
    r0, r1 = round_metrics(e)
    assert r0["mean_response_tokens"] == 100.0  # only sample 0 finished in round 0
    assert r1["mean_response_tokens"] == 300.0  # the resubmitted sample
    assert r1["rollout_tokens_per_s"] == pytest.approx(150.0)  # 300 tokens / (5 - 3) s


def test_step_metrics_carry_the_trace_figures() -> None:
    from harness.core.metrics import step_metrics

    e = [head(), ev(0.0, "rollout_start", round=0, version=0),
         ev(3.0, "optimizer_step", step=1, version=1, tokens=10, lag_min=0, lag_mean=0.5,
            lag_max=1, ess=0.9, ess_clamped=0.95),
         ev(4.0, "optimizer_step", step=2, version=2)]
    rows = step_metrics(e)
    assert [r["step"] for r in rows] == [1, 2]
    assert (rows[0]["lag_max"], rows[0]["ess"], rows[0]["tokens"]) == (1, 0.9, 10)
    assert math.isnan(rows[1]["ess"])  # a trace without the figures reports NaN


def test_both_throughput_definitions_by_hand() -> None:
    """APRIL-style carry-over across two rounds. `batch_tokens_per_s` is slime's
    logged throughput (full lengths of the samples the round trains, resumed
    prefixes included); `rollout_tokens_per_s` is the paper's text (tokens
    generated in the round, aborted work included, resumed prefixes not again)."""
    e = [
        head(), ev(0.0, "rollout_start", round=0, version=0),
        *[submit(0.0, 0, g, s) for g in range(2) for s in range(2)],
        finish(1.0, 0, 0, 100, 0),
        finish(2.0, 1, 0, 50, 0),
        finish(3.0, 1, 1, 70, 0), ev(3.0, "group_complete", group=1),
        ev(3.0, "group_materialized", group=1),
        finish(4.0, 0, 1, 40, 0, status="aborted"),  # stopped: carried to round 1
        ev(4.0, "rollout_complete", round=0),
        ev(4.0, "batch_dispatch", batch=0, groups=[1]),
        ev(4.0, "train_start", batch=0), ev(5.0, "train_end", batch=0),
        ev(5.0, "optimizer_step", step=1, version=1),
        ev(5.0, "rollout_start", round=1, version=1),
        submit(5.0, 1, 0, 1, resumed_tokens=40),
        finish(7.0, 0, 1, 100, 1),  # 40 carried + 60 generated now
        ev(7.0, "group_complete", group=0), ev(7.0, "group_materialized", group=0),
        ev(7.0, "rollout_complete", round=1),
        ev(7.0, "batch_dispatch", batch=1, groups=[0]),
        ev(7.0, "train_start", batch=1), ev(8.0, "train_end", batch=1),
        ev(8.0, "optimizer_step", step=2, version=2),
    ]
    r0, r1 = round_metrics(e)
    # round 0: generated 100 + 50 + 70 + 40 (aborted) = 260 tokens in 4 s
    assert r0["rollout_tokens_per_s"] == pytest.approx(65.0)
    # round 0 trains group 1 only: 50 + 70 = 120 tokens in 4 s
    assert r0["batch_tokens_per_s"] == pytest.approx(30.0)
    # round 1: generated 100 - 40 = 60 tokens in 7 - 5 = 2 s
    assert r1["rollout_tokens_per_s"] == pytest.approx(30.0)
    # round 1 trains group 0: sample 0 (100, made in round 0) + sample 1 (100, its first
    # 40 made in round 0) = 200 tokens in 2 s
    assert r1["batch_tokens_per_s"] == pytest.approx(100.0)
