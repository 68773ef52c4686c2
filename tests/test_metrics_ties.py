"""Round attribution at ties: an event at the same time as the next round's
`rollout_start` belongs to the round before it in the file. Hand-built traces,
expected values worked out by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from test_metrics import assert_row, ev, finish, head, submit

from harness.core.files import dump_json
from harness.core.metrics import finished_rounds, prefix_metrics, round_metrics
from harness.core.trace import Trace


def ties_at_round_starts() -> list[dict[str, Any]]:
    """Three rounds of one group of K=1, U=1, whose boundaries share their times:
    weight sync takes no time, so round 0's last step and its publication happen at
    4.0, the instant round 1 starts; round 2 starts at 6.0, as round 1's batch is
    dispatched, and trains while round 2 generates."""
    return [
        head(), ev(0.0, "rollout_start", round=0, version=0),
        submit(0.0, 0, 0, 0), submit(0.0, 0, 1, 0),
        finish(1.0, 0, 0, 100, 0), ev(1.0, "group_materialized", group=0),
        ev(1.0, "batch_dispatch", batch=0, groups=[0]),
        ev(1.0, "train_start", batch=0), ev(2.0, "train_end", batch=0),
        ev(2.0, "optimizer_step", step=1, version=1, ess=0.9, ess_clamped=0.95, lag_mean=0,
           lag_max=0),
        finish(2.0, 1, 0, 300, 0), ev(2.0, "group_materialized", group=1),
        ev(2.0, "rollout_complete", round=0),
        ev(2.0, "batch_dispatch", batch=1, groups=[1]),
        ev(2.0, "train_start", batch=1), ev(4.0, "train_end", batch=1),
        # the tie: round 0's step and publication at the instant round 1 starts
        ev(4.0, "optimizer_step", step=2, version=2, ess=0.7, ess_clamped=0.75, lag_mean=1,
           lag_max=1),
        ev(4.0, "weights_published", version=2),
        ev(4.0, "rollout_start", round=1, version=2),
        submit(4.0, 1, 2, 0), finish(6.0, 2, 0, 200, 2),
        ev(6.0, "group_materialized", group=2), ev(6.0, "rollout_complete", round=1),
        # the tie: round 1's batch leaves at the instant round 2 starts
        ev(6.0, "batch_dispatch", batch=2, groups=[2]),
        ev(6.0, "rollout_start", round=2, version=2),
        ev(6.0, "train_start", batch=2), submit(6.0, 2, 3, 0), ev(7.0, "train_end", batch=2),
        ev(7.0, "optimizer_step", step=3, version=3, ess=0.5, ess_clamped=0.55, lag_mean=0,
           lag_max=0),  # after round 2's rollout_start: round 2's step
        ev(7.0, "weights_published", version=3),
        finish(8.0, 3, 0, 400, 2), ev(8.0, "group_materialized", group=3),
        ev(8.0, "rollout_complete", round=2),
        ev(8.0, "batch_dispatch", batch=3, groups=[3]),
        ev(8.0, "train_start", batch=3), ev(9.0, "train_end", batch=3),
        ev(9.0, "optimizer_step", step=4, version=4, ess=0.3, ess_clamped=0.35, lag_mean=1,
           lag_max=2),
        ev(9.0, "weights_published", version=4), ev(9.0, "run_end"),
    ]


def test_an_event_at_a_round_start_belongs_to_the_round_before_it_in_the_file() -> None:
    """A step or a dispatch at the same instant as the next rollout_start belongs to
    the round whose rollout_start precedes it in the trace, not to the next one
    (comparing times, t0 <= t < t_next, gave it to the next round: round 0's ESS
    left out its last step, and round 1 lost its batch and all its figures)."""
    r0, r1, r2 = round_metrics(ties_at_round_starts())
    assert_row(r0, {
        "rollout_to_train_end_s": 4.0,  # batch 1 ends at 4.0
        "first_dispatch_s": 1.0,  # batch 0 at 1.0
        "rollout_complete_s": 2.0,
        "trainer_compute_s": 3.0,  # (2 - 1) + (4 - 2)
        "mean_response_tokens": 200.0,  # (100 + 300) / 2
        "rollout_tokens_per_s": 200.0,  # 400 / 2
        "waiting_ratio": 0.25,  # (4 - 3) / 4
        "start_wait_ratio": 0.25,  # (1 - 0) / 4
        "lower_bound_s": 4.0,  # U = 1: t_U = 1, t_last = 2 (batch 1, c = 2): max(1 + 3, 2 + 2)
        "efficiency": 1.0,
    })
    # steps 1 and 2 (the one at 4.0, before round 1's rollout_start)
    assert (r0["ess"], r0["ess_clamped"]) == (pytest.approx(0.8), pytest.approx(0.85))
    assert (r0["lag_mean"], r0["lag_max"]) == (0.5, 1)  # mean(0, 1), max(0, 1)
    assert_row(r1, {  # t0 = 4: batch 2, dispatched at 6.0 before round 2's rollout_start
        "rollout_to_train_end_s": 3.0,  # 7 - 4
        "first_dispatch_s": 2.0,  # 6 - 4
        "rollout_complete_s": 2.0,  # 6 - 4
        "trainer_compute_s": 1.0,  # 7 - 6
        "mean_response_tokens": 200.0,
        "rollout_tokens_per_s": 100.0,  # 200 / 2
        "waiting_ratio": 2 / 3,  # (3 - 1) / 3
        "start_wait_ratio": 2 / 3,  # (6 - 4) / 3
        "lower_bound_s": 3.0,  # t_U = t_last = 2, c = 1: max(2 + 1, 2 + 1)
        "efficiency": 1.0,
    })
    assert math.isnan(r1["ess"])  # no step between round 1's and round 2's rollout_start
    assert_row(r2, {  # t0 = 6: batch 3 only
        "rollout_to_train_end_s": 3.0,  # 9 - 6
        "first_dispatch_s": 2.0,  # 8 - 6
        "rollout_complete_s": 2.0,  # 8 - 6
        "trainer_compute_s": 1.0,  # 9 - 8
        "mean_response_tokens": 400.0,
        "rollout_tokens_per_s": 200.0,  # 400 / 2
        "waiting_ratio": 2 / 3,  # (3 - 1) / 3
        "start_wait_ratio": 2 / 3,  # (8 - 6) / 3
        "lower_bound_s": 3.0,  # t_U = t_last = 2, c = 1
        "efficiency": 1.0,
    })
    # steps 3 (at 7.0, after round 2's rollout_start at 6.0) and 4
    assert (r2["ess"], r2["ess_clamped"]) == (pytest.approx(0.4), pytest.approx(0.45))
    assert (r2["lag_mean"], r2["lag_max"]) == (0.5, 2)


def test_ties_at_round_starts_read_the_same_when_the_trace_stops_short() -> None:
    """Cut anywhere, a round the trace calls finished has the whole trace's figures:
    attribution by position depends only on the events before. (By time, a trace cut
    just before round 1's rollout_start gave round 0 the step at 4.0 that the whole
    trace gave round 1.)"""
    events = ties_at_round_starts()
    full = json.loads(dump_json(round_metrics(events)))
    cut = events.index(ev(4.0, "rollout_start", round=1, version=2))
    assert finished_rounds(events[:cut]) == {0}  # published at 4.0 after its last train_end
    assert finished_rounds(events[:cut + 1]) == {0}
    before: set[int] = set()
    for n in range(1, len(events)):
        rows = json.loads(dump_json(prefix_metrics(Trace(Path("x"), events[:n]))))
        done = {r["round"] for r in rows if not r.pop("incomplete")}
        assert before <= done and done == finished_rounds(events[:n]), n
        before = done
        assert [r for r in rows if r["round"] in done] == [full[r] for r in sorted(done)], n
    assert before == {0, 1, 2}  # the last cut: round 2's weights published after its work
