"""verl's fully-async trainer (systems/verl_fully_async.py): its rule, read from traces.

The small config: sci-jl, R = 8 groups of K = 8, U = 2, 2 rounds (16 groups, 8
optimizer steps). By hand, with require_batches B and trigger T a sync comes every
T x B steps, and the rollouter may start M = int(U x B x (1 + s) x T) groups per sync,
less the O groups started and not yet trained when the sync resets its count.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.core.config import ConfigError, RunConfig
from harness.core.trace import read_trace
from harness.run.execute import execute
from systems.verl_fully_async import VerlFullyAsync, max_required_samples


def config(**verl: Any) -> RunConfig:
    cfg = RunConfig(system="verl-fully-async", workload="sci-jl", groups=8, update_groups=2,
                    rounds=2, seed=3)
    for key, value in verl.items():
        setattr(cfg.verl_async, key, value)
    return cfg.validate()


def run(tmp_path: Path, **verl: Any) -> list[dict]:
    path = tmp_path / "t.jsonl"
    execute(config(**verl), path)
    return read_trace(path)


def windows(events: list[dict]) -> list[tuple[int, int, int]]:
    """(groups started in the window, O at its start, the reset the system recorded)
    per window between parameter syncs, O counted from the trace: groups started
    before the sync less those dispatched to the trainer before it."""
    seen: set[int] = set()
    started = dispatched = count = 0
    out: list[tuple[int, int, int]] = []
    carried, recorded = 0, 0
    for e in events:
        if e["ev"] == "request_submit" and e["group"] not in seen:
            seen.add(e["group"])
            started += 1
            count += 1
        elif e["ev"] == "batch_dispatch":
            dispatched += len(e["groups"])
        elif e["ev"] == "decision" and e["what"] == "param_sync":
            out.append((count, carried, recorded))
            carried, recorded, count = started - dispatched, e["staleness_samples"], 0
    return [*out, (count, carried, recorded)]


def lags(events: list[dict]) -> list[float]:
    return [e["lag_max"] for e in events if e["ev"] == "optimizer_step"]


def final_responses(events: list[dict]) -> dict[tuple[int, int], dict]:
    """The last request_finish of each (group, sample): the response trained."""
    out: dict[tuple[int, int], dict] = {}
    for e in events:
        if e["ev"] == "request_finish":
            out[(e["group"], e["sample"])] = e
    return out


def test_the_default_staleness_is_verls_documented_one() -> None:
    """0.5, as verl's docs run it (fully_async.md:352, 529), not the code's 0.1: at U = 2
    and trigger 4, int(2 x 1.5 x 4) = 12 groups a sync, 4 of them stale, so the rule
    promises no lag bound (it was 0.1: 8 groups, none stale, a bound of 3)."""
    cfg = config()
    assert cfg.verl_async.staleness_threshold == 0.5
    assert max_required_samples(cfg) == 12
    assert VerlFullyAsync.staleness_bound(cfg) is None


def test_budget_and_bound_by_hand() -> None:
    code = config(staleness_threshold=0.1)  # verl's code default (the yaml's)
    assert max_required_samples(code) == 8  # int(2 x 1 x 1.1 x 4) = int(8.8)
    big = config(require_batches=4, staleness_threshold=0.5)
    big.update_groups, big.groups = 32, 128
    assert max_required_samples(big) == 768  # the README's 7B runs: 32 x 4 x 1.5 x 4
    assert max_required_samples(config(staleness_threshold=0.1, trigger_parameter_sync_step=1)
                                ) == 2  # int(2.2): s = 0.1 buys no stale group at W = 2
    bound = VerlFullyAsync.staleness_bound
    assert bound(code) == 3  # M = 8 = W: no stale group, lag < T x B = 4 steps
    assert bound(config(staleness_threshold=0, trigger_parameter_sync_step=2,
                        require_batches=2)) == 3
    assert bound(config(staleness_threshold=0.5)) is None  # stale groups: counts only
    assert bound(config(staleness_threshold=0.5, partial_rollout=False)) is None


def test_require_batches_times_u_must_divide_r() -> None:
    with pytest.raises(ConfigError, match="verl_async.require_batches"):
        config(require_batches=3)


@pytest.mark.parametrize("s,partial", [(0.0, True), (0.5, False), (0.5, True), (1.0, True)])
def test_each_sync_starts_at_most_the_budget_less_the_stale(tmp_path: Path, s: float,
                                                            partial: bool) -> None:
    events = run(tmp_path, staleness_threshold=s, trigger_parameter_sync_step=1,
                 partial_rollout=partial)
    limit = int(2 * (1 + s))  # W = 2 groups a sync (T = B = 1), M = int(2 (1 + s))
    rows = windows(events)
    assert len(rows) == 9  # 8 syncs, one per step, and the window before the first
    for count, carried, recorded in rows:
        assert recorded == carried  # the reset is the in-flight plus queued groups
        assert count <= limit - carried
    assert rows[0][0] == limit  # the first window starts the whole budget
    assert sum(c for c, _, _ in rows) == 16
    if s == 0:  # synchronous: exactly one sync's groups, nothing left at a sync
        assert [c for c, _, _ in rows] == [2] * 8 + [0]
        assert all(o == 0 for _, o, _ in rows)
    else:  # stale groups are carried over a sync
        assert any(o > 0 for _, o, _ in rows)


@pytest.mark.parametrize("trigger,batches,expected", [
    (1, 1, [0] * 8),  # mode 1, on-policy pipeline: one step per sync
    (4, 1, [0, 1, 2, 3] * 2),  # mode 2, stream off-policy pipeline
    (2, 2, [0, 1, 2, 3] * 2),  # a sync every T x B = 4 steps
])
def test_synchronous_modes_lag_within_one_sync(tmp_path: Path, trigger: int, batches: int,
                                                expected: list[int]) -> None:
    events = run(tmp_path, staleness_threshold=0, trigger_parameter_sync_step=trigger,
                 require_batches=batches)
    assert lags(events) == expected
    assert max(expected) == VerlFullyAsync.staleness_bound(config(
        staleness_threshold=0, trigger_parameter_sync_step=trigger, require_batches=batches))
    published = [e["version"] for e in events if e["ev"] == "weights_published"]
    assert published == list(range(trigger * batches, 9, trigger * batches))
    assert all(e["status"] == "finished" for e in final_responses(events).values())


def test_require_batches_waits_for_all_its_groups(tmp_path: Path) -> None:
    for b, need in ((1, 2), (2, 4)):
        events = run(tmp_path, staleness_threshold=0, trigger_parameter_sync_step=2,
                     require_batches=b)
        first = next(e["t"] for e in events if e["ev"] == "batch_dispatch")
        done = [e["t"] for e in events if e["ev"] == "group_materialized"]
        assert first >= done[need - 1]  # B x U groups queued before the first step
        if b == 2:
            assert first >= done[3] > done[1]


def test_mode_3_trains_cut_responses_and_keeps_its_bound(tmp_path: Path) -> None:
    events = run(tmp_path, staleness_threshold=0.5, trigger_parameter_sync_step=1,
                 partial_rollout=False)
    resubmits = [e for e in events if e["ev"] == "request_submit" and e["resumed_tokens"]]
    assert not resubmits  # nothing resumed
    final = final_responses(events)
    cut = [e for e in final.values() if e["status"] == "aborted"]
    assert cut  # responses cut at a sync are trained as they are
    assert all(len(e["version_spans"]) <= 1 for e in final.values())  # one version each
    assert max(lags(events)) == 1  # a group cut at a sync trains one step later


def test_a_slow_reward_check_ages_a_stale_group_past_one_sync(tmp_path: Path) -> None:
    # Why mode 3 has no version bound: rp-code's sandbox checks run for tens of
    # seconds, so a group cut at a sync is queued after newer groups and trained 4
    # steps after its version (W = 1 group a sync, s = 1: one stale group at a time).
    cfg = RunConfig(system="verl-fully-async", workload="rp-code", groups=8,
                    update_groups=1, group_size=4, rounds=2, seed=1,
                    max_response_tokens=2048)
    cfg.verl_async.staleness_threshold = 1.0
    cfg.verl_async.trigger_parameter_sync_step = 1
    cfg.verl_async.partial_rollout = False
    path = tmp_path / "t.jsonl"
    execute(cfg.validate(), path)
    assert max(lags(read_trace(path))) == 4


def test_mode_4_resumes_cut_responses_under_new_weights(tmp_path: Path) -> None:
    events = run(tmp_path, staleness_threshold=0.5, trigger_parameter_sync_step=1)
    resubmits = [e for e in events if e["ev"] == "request_submit" and e["resumed_tokens"]]
    assert resubmits
    final = final_responses(events)
    assert all(e["status"] == "finished" for e in final.values())
    spans = [e["version_spans"] for e in final.values()]
    assert any(len(s) > 1 for s in spans)  # a response carries two versions
    for s in spans:
        versions = [v for v, _ in s]
        assert versions == sorted(versions)


def test_every_group_trained_once_and_backlog_within_budget(tmp_path: Path) -> None:
    events = run(tmp_path, staleness_threshold=1.0, trigger_parameter_sync_step=1)
    started = {e["group"] for e in events if e["ev"] == "request_submit"}
    trained = [g for e in events if e["ev"] == "batch_dispatch" for g in e["groups"]]
    assert sorted(trained) == sorted(started) and len(trained) == 16
    backlog = peak = 0
    for e in events:  # groups generated and not yet handed to the trainer
        if e["ev"] == "group_materialized":
            backlog += 1
        elif e["ev"] == "batch_dispatch":
            backlog -= len(e["groups"])
        peak = max(peak, backlog)
    assert 0 < peak <= 4  # M = int(2 x 2) = 4


@pytest.mark.parametrize("per_replica,most", [(1, 1), (16, 8)])
def test_concurrent_samples_per_replica_caps_groups_in_flight(tmp_path: Path,
                                                              per_replica: int,
                                                              most: int) -> None:
    events = run(tmp_path, staleness_threshold=0, concurrent_samples_per_replica=per_replica)
    seen: set[int] = set()
    flying = peak = 0
    for e in events:
        if e["ev"] == "request_submit" and e["group"] not in seen:
            seen.add(e["group"])
            flying += 1
        elif e["ev"] == "group_complete":
            flying -= 1
        peak = max(peak, flying)
    assert peak == most  # min(1 replica x per_replica, M = 8)


@pytest.mark.live
@pytest.mark.slow
def test_live_run_keeps_the_budget_and_syncs_every_step(model_dir: Path,
                                                        tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    cfg = RunConfig(system="verl-fully-async", workload="arith", runtime="live", groups=4,
                    group_size=4, update_groups=2, rounds=2, max_response_tokens=32)
    cfg.verl_async.trigger_parameter_sync_step = 1
    cfg.verl_async.staleness_threshold = 0.5  # W = 2 groups a sync, M = int(3.0) = 3
    cfg.live.model_dir = str(model_dir)
    cfg.live.ray_address = "off"
    path = tmp_path / "live.jsonl"
    execute(cfg.validate(), path)
    events = read_trace(path)
    assert events[-1]["ev"] == "run_end" and "error" not in events[-1]
    assert [e["version"] for e in events if e["ev"] == "weights_published"] == [1, 2, 3, 4]
    rows = windows(events)
    assert len(rows) == 5 and rows[0][0] == 3
    for count, carried, recorded in rows:
        assert recorded == carried and count <= 3 - carried
    started = {e["group"] for e in events if e["ev"] == "request_submit"}
    trained = [g for e in events if e["ev"] == "batch_dispatch" for g in e["groups"]]
    assert sorted(trained) == sorted(started) and len(trained) == 8
    assert all(e["status"] == "finished" for e in final_responses(events).values())
