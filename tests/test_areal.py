"""AReaL's rules on simulated traces (sci-jl, R = 8, U = 2, 2 rounds: 8 steps, 16 groups),
and one small live run."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.config import RunConfig
from systems.areal import AReaL
from tests.async_view import batches, complete_untrained, lags, live_run, sim_run, starts

U = 2


def test_admission_never_passes_the_version_cap_and_reaches_it(tmp_path: Path) -> None:
    # ofp = 1: the n-th group (from 1) may start only once n <= (1 + v + 1) x 2, v the
    # weights in the engine: 4 groups on v0, 6 by v1, ..., 16 by v6.
    events = sim_run(tmp_path, "areal", areal__max_head_offpolicyness=1,
                     areal__max_concurrent_rollouts=16)
    s = starts(events)
    assert len(s) == 16
    assert all(x.order + 1 <= (1 + x.version + 1) * U for x in s)
    assert any(x.order + 1 == (1 + x.version + 1) * U for x in s[4:])  # binds after step 0
    assert [x.version for x in s[:4]] == [0, 0, 0, 0]
    assert s[4].version >= 1  # the 5th waits for the first update


def test_max_concurrent_rollouts_caps_running_groups(tmp_path: Path) -> None:
    # 3 groups at most between start and last reward, however far ahead the version allows
    events = sim_run(tmp_path, "areal", areal__max_head_offpolicyness=4,
                     areal__max_concurrent_rollouts=3)
    s = starts(events)
    running = [x.order - x.done_before + 1 for x in s]
    assert max(running) == 3


def test_every_update_aborts_what_runs_and_it_resumes_from_its_prefix(tmp_path: Path) -> None:
    events = sim_run(tmp_path, "areal", areal__max_head_offpolicyness=1,
                     areal__max_concurrent_rollouts=8)
    interrupts = [e for e in events if e["ev"] == "decision" and e["what"] == "interrupt"]
    assert len(interrupts) == 8  # one per optimizer step
    aborted = [(i, e) for i, e in enumerate(events)
               if e["ev"] == "request_finish" and e["status"] == "aborted"]
    assert sum(e["requests"] for e in interrupts) == len(aborted) > 0
    for i, e in aborted:  # the same sample is sent again with exactly its tokens so far
        again = next(x for x in events[i + 1:] if x["ev"] == "request_submit"
                     and (x["group"], x["sample"]) == (e["group"], e["sample"]))
        assert again["resumed_tokens"] == e["response_tokens"]
    for e in events:  # nothing generated between an abort and the new weights
        if e["ev"] == "request_finish" and e["status"] == "finished":
            versions = [v for v, _ in e["version_spans"]]
            assert versions == sorted(set(versions))
    mixed = [e for e in events if e["ev"] == "request_finish" and e["status"] == "finished"
             and len(e["version_spans"]) > 1]
    assert mixed  # some samples carry tokens of two policies


def test_a_batch_is_the_oldest_started_of_the_complete_groups(tmp_path: Path) -> None:
    events = sim_run(tmp_path, "areal", areal__max_head_offpolicyness=2,
                     areal__max_concurrent_rollouts=16)
    order = {x.group: x.order for x in starts(events)}
    for at, groups in batches(events):
        waiting = sorted(complete_untrained(events, at), key=order.get)
        assert sorted(groups, key=order.get) == waiting[:U]


def test_the_knob_bounds_admission_not_the_lag_of_trained_tokens(tmp_path: Path) -> None:
    # AReaL#602: a group that generates across updates keeps its early tokens and is
    # trained when it completes, after younger groups; its lag passes the knob
    events = sim_run(tmp_path, "areal", areal__max_head_offpolicyness=1,
                     areal__max_concurrent_rollouts=8)
    assert max(lags(events)) == 2 > 1
    assert AReaL().staleness_bound(RunConfig()) is None


def test_defaults_are_areals_math_example() -> None:
    """AReaL's math example (gsm8k_grpo.yaml:25, 28), not its code default: the run is
    asynchronous unless asked otherwise (it was ofp 0, max_concurrent_rollouts U)."""
    knobs = RunConfig().areal
    assert (knobs.max_head_offpolicyness, knobs.max_concurrent_rollouts) == (2, 256)
    assert knobs.concurrent(RunConfig()) == 256


def test_the_code_default_reading_is_synchronous(tmp_path: Path) -> None:
    # ofp 0 and max_concurrent_rollouts 0 (= U): two groups a step, started on the
    # weights they are trained against; nothing is in flight at an update
    events = sim_run(tmp_path, "areal", areal__max_head_offpolicyness=0,
                     areal__max_concurrent_rollouts=0)
    assert lags(events) == [0] * 8
    assert [x.version for x in starts(events)] == [v for v in range(8) for _ in range(U)]
    assert [g for _, g in batches(events)] == [[2 * k, 2 * k + 1] for k in range(8)]
    assert all(e["requests"] == 0 for e in events
               if e["ev"] == "decision" and e["what"] == "interrupt")


@pytest.mark.live
@pytest.mark.slow
def test_live_run_interrupts_and_resumes(model_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    events = live_run(model_dir, "areal", tmp_path, areal__max_head_offpolicyness=1,
                      areal__max_concurrent_rollouts=4)
    assert events[-1]["ev"] == "run_end" and "error" not in events[-1]
    steps = [e for e in events if e["ev"] == "optimizer_step"]
    assert [e["version"] for e in steps] == [1, 2, 3, 4]
    assert all(0 < e["ess"] <= 1 for e in steps)
    finished = [e for e in events if e["ev"] == "request_finish" and e["status"] == "finished"]
    assert len(finished) == 2 * 4 * 4
    trained = [g for _, g in batches(events)]
    assert sorted(g for b in trained for g in b) == sorted({e["group"] for e in finished})
    s = starts(events)
    assert all(x.order + 1 <= (1 + x.version + 1) * U for x in s)
    assert all(x.order - x.done_before + 1 <= 4 for x in s)
