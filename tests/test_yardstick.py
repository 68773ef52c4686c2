"""The one yardstick (harness.core.yardstick): its steady window of optimizer steps and
what a run delivers over it, on hand-built traces whose figures are worked by hand."""

from __future__ import annotations

import math
from typing import Any

from harness.core.yardstick import MIN_STEPS, delivered, window


class Run:
    """A trace built event by event, in order (the yardstick reads positions)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = [
            {"t": 0.0, "ev": "run_start", "schema": 2, "system": "x", "workload": "w",
             "runtime": "sim", "seed": 0, "config": {}, "version": "0"}]
        self.batch = self.step = 0

    def submit(self, t: float, *groups: int) -> None:
        for g in groups:
            self.events.append({"t": t, "ev": "request_submit", "round": 0, "group": g,
                                "sample": 0, "prompt_tokens": 1})

    def finish(self, t: float, group: int, tokens: int) -> None:
        self.events.append({"t": t, "ev": "request_finish", "group": group, "sample": 0,
                            "response_tokens": tokens, "status": "finished",
                            "versions": [0, 0]})

    def train(self, t: float, tokens: int, *groups: int) -> None:
        """One batch of `groups` (a sample each) trained and stepped at t."""
        b = self.batch
        self.events += [{"t": t, "ev": "batch_dispatch", "batch": b, "groups": list(groups)},
                        {"t": t, "ev": "train_start", "batch": b, "samples": len(groups)},
                        {"t": t, "ev": "train_end", "batch": b},
                        {"t": t, "ev": "optimizer_step", "step": self.step + 1,
                         "version": self.step + 1, "tokens": tokens, "lag_mean": 1.0,
                         "lag_max": 2, "ess": 0.9}]
        self.batch += 1
        self.step += 1

    def drop(self, t: float, group: int) -> None:
        self.events.append({"t": t, "ev": "decision", "what": "drop_group", "group": group,
                            "reason": "test"})


def test_a_synchronous_run_is_measured_whole() -> None:
    """Three rounds of two groups, one step per group: the pipeline is empty after every
    round, so there is no warm-up and no drain; 6 steps x 100 tokens over 30 s."""
    run, g = Run(), 0
    for r in range(3):
        t0 = 10.0 * r
        run.submit(t0, g, g + 1)
        run.finish(t0 + 6, g, 100)
        run.finish(t0 + 8, g + 1, 100)
        run.train(t0 + 9, 100, g)
        run.train(t0 + 10, 100, g + 1)
        g += 2
    fig = delivered(run.events)
    assert (fig["warmup_steps"], fig["drain_steps"], fig["window_steps"]) == (0, 0, 6)
    assert fig["trained_tokens_per_s"] == 600 / 30
    assert fig["trained_samples_per_s"] == 6 / 30
    assert fig["step_s"] == 5.0
    assert fig["generated_tokens_per_s"] == 600 / 30


def _async(fill: int, total: int, tail: int) -> Run:
    """An asynchronous run: `fill` groups submitted at t = 0, then one new group after
    each step until `total` are submitted; step i (at t = 10 i) trains group i - 1 (100
    tokens); `tail` groups are still in flight when the last new one goes in."""
    run = Run()
    run.submit(0.0, *range(fill))
    born = fill
    for i in range(1, total + 1):
        run.finish(10.0 * i - 1, i - 1, 100)
        run.train(10.0 * i, 100, i - 1)
        if born < total and total - born > tail - fill:
            run.submit(10.0 * i, born)
            born += 1
    return run


def test_a_late_steady_state_is_cut_after_its_fill() -> None:
    """Five groups in flight from t = 0 and 20 groups in all: steps 1-5 train the first
    fill (submitted before step 1), so the window opens at step 5's end (t = 50); the last
    new group goes in after step 15 (groups 15-19 are then in flight), so steps 16-20 are
    the drain and the window closes at t = 150: steps 6-15, 1,000 tokens over 100 s."""
    win, why = window(_async(5, 20, 5).events)
    assert why == "" and win is not None
    assert (win.warmup, win.drain, win.start_s, win.end_s) == (5, 5, 50.0, 150.0)
    fig = delivered(_async(5, 20, 5).events)
    assert fig["trained_tokens_per_s"] == 1000 / 100
    assert fig["step_s"] == 10.0
    assert fig["window_lag_mean"] == 1.0 and fig["window_ess"] == 0.9


def test_a_long_drain_is_cut_before_it() -> None:
    """Two groups from t = 0 but the last of 20 submitted after step 4 (the run then
    trains 16 groups already in flight): steps 1-2 fill, steps 5-20 drain; the window
    is steps 3-4, shorter than MIN_STEPS: no window, and the reason says so."""
    run = Run()
    run.submit(0.0, 0, 1)
    for i in range(1, 21):
        run.finish(10.0 * i - 1, i - 1, 100)
        run.train(10.0 * i, 100, i - 1)
        if i <= 4:
            run.submit(10.0 * i, *range(2 + 4 * (i - 1), 2 + 4 * i) if i < 4 else
                       range(14, 20))
    win, why = window(run.events)
    assert win is None and MIN_STEPS > 2
    assert "of its 20 optimizer steps, 2 trained the pipeline's first fill and 16 came " \
           "after its last new group, leaving 2 (at least" in why
    fig = delivered(run.events)
    assert math.isnan(fig["trained_tokens_per_s"]) and fig["no_window"] == why


def test_a_run_all_in_flight_at_once_is_one_fill() -> None:
    """Every group submitted before the first step: the fill is the whole run and the
    pipeline is empty at its end, so the window is the whole run (the run's own rate)."""
    run = Run()
    run.submit(0.0, *range(6))
    for i in range(1, 7):
        run.finish(10.0 * i - 1, i - 1, 50)
        run.train(10.0 * i, 50, i - 1)
    fig = delivered(run.events)
    assert (fig["warmup_steps"], fig["drain_steps"], fig["window_steps"]) == (0, 0, 6)
    assert fig["trained_tokens_per_s"] == 300 / 60


def test_a_fill_over_two_steps_with_nothing_new_after_is_one_fill() -> None:
    """Three groups before step 1 and the last three before step 2, none after: the
    drain (steps 2-6) begins inside the fill (steps 1-2), so there is no steady state
    and the run is measured whole: 6 x 50 tokens over 60 s."""
    run = Run()
    run.submit(0.0, 0, 1, 2)
    for i in range(1, 7):
        run.finish(10.0 * i - 1, i - 1, 50)
        run.train(10.0 * i, 50, i - 1)
        if i == 1:
            run.submit(10.0, 3, 4, 5)
    win, _ = window(run.events)
    assert win is not None and (win.warmup, win.drain, win.start_s) == (0, 0, 0.0)
    assert delivered(run.events)["trained_tokens_per_s"] == 300 / 60


def test_a_dropped_group_leaves_the_pipeline() -> None:
    """A synchronous round whose third group is dropped, not trained: the pipeline is
    still empty between rounds, so the run is measured whole (two steps a round)."""
    run, g = Run(), 0
    for r in range(3):
        t0 = 10.0 * r
        run.submit(t0, g, g + 1, g + 2)
        run.drop(t0 + 5, g + 2)
        run.train(t0 + 9, 100, g)
        run.train(t0 + 10, 100, g + 1)
        g += 3
    fig = delivered(run.events)
    assert (fig["warmup_steps"], fig["drain_steps"]) == (0, 0)
    assert fig["trained_tokens_per_s"] == 600 / 30


def test_no_optimizer_step_no_window() -> None:
    run = Run()
    run.submit(0.0, 0)
    run.finish(5.0, 0, 10)
    fig = delivered(run.events)
    assert "no optimizer step" in fig["no_window"]
    assert math.isnan(fig["step_s"])


def test_run_prints_what_it_delivered(tmp_path) -> None:  # noqa: ANN001
    """`run` ends with the yardstick's line, its figure the trace's own."""
    from typer.testing import CliRunner

    from harness.cli.app import app
    from harness.core.trace import read_trace

    out = tmp_path / "r"
    done = CliRunner().invoke(app, ["run", "--system", "cgp", "--workload", "lsat-ar", "-R",
                                    "8", "-U", "2", "--rounds", "3", "--out", str(out)])
    assert done.exit_code == 0, done.output
    fig = delivered(read_trace(out / "trace.jsonl.zst"))
    text = " ".join(done.stdout.split())
    assert "delivered over steps 1-12" in text  # cgp empties its pipeline between rounds
    assert f"{fig['trained_tokens_per_s']:,.0f} trained tok/s" in text
    assert f"mean lag {fig['window_lag_mean']:.2f} steps (max {fig['window_lag_max']:.0f})" \
        in text  # which lag, said


def test_every_field_output_carries_what_the_run_delivered(tmp_path) -> None:  # noqa: ANN001
    """metrics.json, `run --json` and `metrics --csv` give each round's row its run's
    delivered figures (the yardstick's), as the table's line does: they had every
    per-round field but not the figures systems are ranked by."""
    import csv
    import io
    import json

    from typer.testing import CliRunner

    from harness.cli.app import app
    from harness.core.trace import read_trace
    from harness.core.yardstick import KEYS, WINDOW_KEYS

    out = tmp_path / "r"
    done = CliRunner().invoke(app, ["run", "--system", "cgp", "--workload", "lsat-ar", "-R",
                                    "8", "-U", "2", "--rounds", "3", "--out", str(out),
                                    "--json"])
    assert done.exit_code == 0, done.output
    fig = delivered(read_trace(out / "trace.jsonl.zst"))
    assert fig["trained_tokens_per_s"] > 0
    printed = json.loads(done.stdout)
    kept = json.loads((out / "metrics.json").read_text())
    table = CliRunner().invoke(app, ["metrics", str(out), "--csv"])
    assert table.exit_code == 0, table.output
    rows = list(csv.DictReader(io.StringIO(table.stdout)))
    assert len(printed) == len(kept) == len(rows) == 3
    for key in (*KEYS, *WINDOW_KEYS):
        assert [r[key] for r in printed] == [r[key] for r in kept] == [fig[key]] * 3
        assert [float(r[key]) for r in rows] == [fig[key]] * 3
