"""A streaming run's rounds (harness.core.streaming): tokens count where they were
made, rounds are marked warm-up, steady or drain, and summaries use steady rounds."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

from harness.analysis.compare import compare
from harness.core.config import RunConfig
from harness.core.metrics import round_metrics
from harness.core.streaming import steady_summary
from harness.core.trace import read_trace
from harness.run.execute import execute

ROLLOUTBENCH = str(Path(sys.executable).parent / "rolloutbench")


def ev(t: float, kind: str, **fields: object) -> dict:
    return {"t": t, "ev": kind, **fields}


def test_tokens_count_in_the_round_their_version_was_served() -> None:
    """One request submitted in round 0 makes 30 tokens on version 0 and 20 on
    version 1 (served from round 1's start at t=10), finishing at t=15."""
    events = [
        ev(0, "run_start", schema=2, system="pipelinerl", workload="w", runtime="sim", seed=0,
           config={}, version="x"),
        ev(0, "rollout_start", round=0, version=0),
        ev(0, "request_submit", round=0, group=0, sample=0, prompt_tokens=5),
        ev(10, "rollout_start", round=1, version=1),
        ev(15, "request_finish", group=0, sample=0, response_tokens=50, status="finished",
           versions=[0, 1], version_spans=[[0, 30], [1, 20]]),
        ev(20, "rollout_complete", round=1),
        ev(20, "run_end"),
    ]
    rows = round_metrics(events)
    # no optimizer step: no steady window (harness.core.yardstick), so no steady round
    assert [r["phase"] for r in rows] == ["warm-up", "warm-up"]
    assert math.isnan(rows[0]["mean_response_tokens"])  # nothing finished in round 0
    assert rows[1]["mean_response_tokens"] == 50
    assert rows[1]["rollout_tokens_per_s"] == 20 / 10  # 20 tokens over round 1's 10 s


def test_tokens_count_in_the_round_they_were_made_when_replicas_lag() -> None:
    """Laminar's replicas pull weights only when their batch ends, so a request can run
    an old version rounds after it was served (findings-13, item 14: steady rounds of
    gen tok/s 0.00). Rounds start at 0, 10 and 20 (versions 0, 1, 2, published then).
    Request a: 0-12, 120 tokens of v0: 100 in round 0, 20 in round 1. b: 14-24 on a
    replica still on v0, 100 tokens: 60 in round 1, 40 in round 2. c: 5-13, 50 of v0
    then 30 of v1 from its publication at 10: 50 in round 0, 30 in round 1 (as by
    version). d: 15-20, 50 of v1: round 1. Round 0: 150 tokens / 10 s; round 1: 20 + 60
    + 30 + 50 = 160 / 10 s; round 2: 40 / 10 s. By version (before): 270, 80 and 0."""
    def fin(t: float, g: int, spans: list[list[int]]) -> dict:
        n = sum(k for _, k in spans)
        return ev(t, "request_finish", group=g, sample=0, response_tokens=n, status="finished",
                  versions=[spans[0][0], spans[-1][0]], version_spans=spans)

    def sub(t: float, rnd: int, g: int) -> dict:
        return ev(t, "request_submit", round=rnd, group=g, sample=0, prompt_tokens=5)

    events = [
        ev(0, "run_start", schema=2, system="laminar", workload="w", runtime="sim", seed=0,
           config={}, version="x"),
        ev(0, "rollout_start", round=0, version=0), sub(0, 0, 0), sub(5, 0, 2),
        ev(10, "weights_published", version=1, relay=True), ev(10, "rollout_complete", round=0),
        ev(10, "rollout_start", round=1, version=1),
        fin(12, 0, [[0, 120]]), fin(13, 2, [[0, 50], [1, 30]]), sub(14, 1, 1), sub(15, 1, 3),
        fin(20, 3, [[1, 50]]), ev(20, "weights_published", version=2, relay=True),
        ev(20, "rollout_complete", round=1), ev(20, "rollout_start", round=2, version=2),
        fin(24, 1, [[0, 100]]), ev(30, "rollout_complete", round=2), ev(30, "run_end"),
    ]
    rows = round_metrics(events)
    assert [r["rollout_tokens_per_s"] for r in rows] == [15.0, 16.0, 4.0]
    assert [r["mean_response_tokens"] for r in rows[1:]] == [(120 + 80 + 50) / 3, 100]


def pipelinerl_run(tmp: Path, **fields: object) -> list[dict]:
    cfg = RunConfig(system="pipelinerl", workload="lsat-ar", groups=8, group_size=4,
                    update_groups=2, rounds=6, concurrency=16, **fields)  # type: ignore[arg-type]
    path = tmp / "p.jsonl"
    execute(cfg.validate(), path)
    return read_trace(path)


def test_every_generated_token_is_counted_once(tmp_path: Path) -> None:
    events = pipelinerl_run(tmp_path)
    rows = round_metrics(events)
    counted = sum(r["rollout_tokens_per_s"] * r["rollout_complete_s"] for r in rows)
    made = sum(e["response_tokens"] - 0 for e in events if e["ev"] == "request_finish")
    assert math.isclose(counted, made, rel_tol=1e-9)
    assert all(r["rollout_tokens_per_s"] > 0 for r in rows)  # no round reads as idle
    assert rows[0]["phase"] == "warm-up" and "steady" in {r["phase"] for r in rows}


def test_the_steady_summary_is_over_steady_rounds_only(tmp_path: Path) -> None:
    rows = round_metrics(pipelinerl_run(tmp_path))
    summary = steady_summary(rows)
    assert summary is not None
    steady = [r for r in rows if r["phase"] == "steady"]
    assert summary["rounds"] == [r["round"] for r in steady]
    tokens = sum(r["rollout_tokens_per_s"] * r["rollout_complete_s"] for r in steady)
    assert math.isclose(summary["tokens_per_s"],
                        tokens / sum(r["rollout_complete_s"] for r in steady))
    mean = compare(rows, rows)
    lag = next(r for r in mean if r["metric"] == "lag_mean")
    assert math.isclose(lag["a"], summary["lag_mean"])  # compare's mean: steady rounds


def test_a_synchronous_run_has_no_phases(tmp_path: Path) -> None:
    cfg = RunConfig(system="slime", workload="lsat-ar", groups=4, group_size=4,
                    update_groups=2, rounds=2).validate()
    execute(cfg, tmp_path / "s.jsonl")
    rows = round_metrics(read_trace(tmp_path / "s.jsonl"))
    assert not any("phase" in r for r in rows) and steady_summary(rows) is None


def test_metrics_says_what_the_run_delivered(tmp_path: Path) -> None:
    """The line under the table: the yardstick's window and trained tokens per second,
    here worked from the trace's own steps (docs/plan.md#the-yardstick)."""
    from harness.core.yardstick import window

    events = pipelinerl_run(tmp_path)
    win, _ = window(events)
    assert win is not None and win.warmup >= 1  # a pipeline of 16 sequences fills first
    steps = [e for e in events if e["ev"] == "optimizer_step"]
    start, end = steps[win.warmup - 1]["t"], steps[win.last - 1]["t"]
    tokens = sum(s["tokens"] for s in steps[win.warmup:win.last])
    done = subprocess.run([ROLLOUTBENCH, "metrics", tmp_path / "p.jsonl"],
                          capture_output=True, text=True)
    assert done.returncode == 0
    out = " ".join(done.stdout.split())
    assert f"delivered over steps {win.first}-{win.last}" in out
    assert f"{tokens / (end - start):,.0f} trained tok/s" in out
