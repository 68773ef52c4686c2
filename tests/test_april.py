"""APRIL's invariants on simulated traces."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.config import RunConfig
from harness.core.trace import read_trace
from systems.april import APRIL


def run(tmp_path: Path, **over: object) -> tuple[list[dict], APRIL]:
    cfg = RunConfig(system="april", workload="sci-jl", groups=8, update_groups=8, rounds=4,
                    over_sampling_groups=16)
    for key, value in over.items():
        setattr(cfg, key, value)
    from harness.sim.runtime import SimRuntime

    system = APRIL()
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "trace.jsonl"
    SimRuntime(cfg.validate(), path).run(system)
    return read_trace(path), system


@pytest.mark.parametrize("dynamic", [False, True])
def test_each_step_trains_exactly_r_groups_once(tmp_path: Path, dynamic: bool) -> None:
    events, _ = run(tmp_path, dynamic_sampling=dynamic)
    batches = [e["groups"] for e in events if e["ev"] == "batch_dispatch"]
    assert len(batches) == 4 and all(len(b) == 8 for b in batches)
    trained = [g for b in batches for g in b]
    assert len(trained) == len(set(trained))
    steps = [e for e in events if e["ev"] == "optimizer_step"]
    assert [e["version"] for e in steps] == [1, 2, 3, 4]


def test_no_partial_response_is_lost(tmp_path: Path) -> None:
    events, system = run(tmp_path)
    aborted = {(e["group"], e["sample"]): e["response_tokens"] for e in events
               if e["ev"] == "request_finish" and e["status"] == "aborted"}
    assert aborted, "over-sampling should abort something"
    finished = {(e["group"], e["sample"]): e for e in events
                if e["ev"] == "request_finish" and e["status"] == "finished"}
    held = {(w.group.id, s): r.tokens for w in system.carried for s, r in w.partial.items()}
    for key, tokens in aborted.items():
        if tokens == 0:
            continue  # never admitted: nothing to keep, it restarts
        if key in finished:
            # resumed later: the finished response starts with the kept tokens
            assert finished[key]["response_tokens"] > tokens
        else:
            assert key in held and held[key] >= tokens  # still held when the run ends
    resumed = [e for e in events if e["ev"] == "request_submit" and e["resumed_tokens"] > 0]
    assert resumed, "partial responses must be resumed"


def test_carried_tokens_are_off_policy(tmp_path: Path) -> None:
    events, _ = run(tmp_path)
    spans = [e["version_spans"] for e in events
             if e["ev"] == "request_finish" and e["status"] == "finished"]
    assert any(len(s) > 1 for s in spans)  # finished across a weight update
    without, _ = run(tmp_path / "b", partial_rollout=False)
    spans = [e["version_spans"] for e in without
             if e["ev"] == "request_finish" and e["status"] == "finished"]
    assert all(len(s) == 1 for s in spans)  # discarding keeps everything on-policy


def test_standard_config_is_synchronous(tmp_path: Path) -> None:
    events, _ = run(tmp_path, over_sampling_groups=0, partial_rollout=False)
    assert not [e for e in events if e["ev"] == "request_finish" and e["status"] == "aborted"]


@pytest.mark.parametrize("system", ["april", "cgp-april"])
@pytest.mark.parametrize("partial", [True, False])
def test_dynamic_sampling_redraws_are_bounded(tmp_path: Path, system: str,
                                              partial: bool) -> None:
    """A response cap of 16 tokens truncates every response: every group scores 0
    and DAPO's filter would drop it. Redraws stop after MAX_SAMPLING_BATCHES
    over-sampling batches a round, and the round trains zero-variance groups.
    Run in a subprocess: before the limit the run never ended (its trace grew by
    megabytes a second)."""
    import subprocess
    import sys

    from systems.april import MAX_SAMPLING_BATCHES

    rounds, groups, k, over = 2, 4, 2, 6
    path = tmp_path / "trace.jsonl"
    code = ("import sys\nfrom harness.cli.common import build_config\n"
            "from harness.run.execute import execute\n"
            "execute(build_config(None, sys.argv[2:]), sys.argv[1])\n")
    sets = [f"system={system}", "workload=sci-jl", "seed=0", f"rounds={rounds}",
            f"groups={groups}", "update_groups=2", f"group_size={k}",
            f"over_sampling_groups={over}", "dynamic_sampling=true",
            f"partial_rollout={str(partial).lower()}", "max_response_tokens=16"]
    try:
        subprocess.run([sys.executable, "-c", code, str(path), *sets], check=True,
                       timeout=30, capture_output=True)
    except subprocess.TimeoutExpired:
        pytest.fail("dynamic sampling redraws without end")
    events = read_trace(path, strict=True)
    assert "error" not in events[-1]
    submits = [e for e in events if e["ev"] == "request_submit"]
    per_round = {r: len({e["group"] for e in submits if e["round"] == r}) for r in range(rounds)}
    # every group dropped: each round submits all its batches, `over` groups each
    assert all(n == MAX_SAMPLING_BATCHES * over for n in per_round.values()), per_round
    decisions = [e for e in events if e["ev"] == "decision"]
    batches = [e["round"] for e in decisions if e["what"] == "over_sample"]
    assert batches == sorted(batches) and all(
        batches.count(r) == MAX_SAMPLING_BATCHES - 1 for r in range(rounds))
    limits = [e for e in decisions if e["what"] == "redraw_limit"]
    assert [e["round"] for e in limits] == list(range(rounds))
    kept = {e["group"] for e in decisions if e["what"] == "keep_group"}
    batches = [e["groups"] for e in events if e["ev"] == "batch_dispatch"]
    trained = [g for b in batches for g in b]
    assert len(trained) == len(set(trained)) == rounds * groups
    assert set(trained) == kept  # every group scored alike: each trained one was kept
    rollouts = [e["round"] for e in events if e["ev"] == "rollout_complete"]
    assert rollouts == list(range(rounds))


@pytest.mark.parametrize("over", [0, 12])
def test_dynamic_sampling_submits_whole_batches(tmp_path: Path, over: int) -> None:
    """slime drops a zero-variance group without replacing it; only when fewer than R
    groups are complete or in flight does it submit a whole over-sampling batch
    (RLsys-Foundation/APRIL@a72b585:slime/rollout/sglang_example.py:241-245, 260-262).
    So new groups arrive at a round's start or at an `over_sample` decision, `over`
    groups at a time (R = 8 for the baseline's 0), and at that decision fewer than R
    groups were trained-to-be or in flight."""
    events, _ = run(tmp_path, dynamic_sampling=True, partial_rollout=False,
                    over_sampling_groups=over, group_size=4, rounds=4,
                    max_response_tokens=2048)  # cut-off responses score 0: some drops
    size = max(over, 8)
    first_submit: dict[int, dict] = {}
    for e in events:
        if e["ev"] == "request_submit":
            first_submit.setdefault(e["group"], e)
    starts = {e["round"]: e["t"] for e in events if e["ev"] == "rollout_start"}
    batches = [e for e in events if e["ev"] == "decision" and e["what"] == "over_sample"]
    assert batches, "some group should score alike and start a new batch"
    for rnd, t0 in starts.items():
        new = [e for e in first_submit.values() if e["round"] == rnd]
        at = {t: sum(1 for e in new if e["t"] == t) for t in {e["t"] for e in new}}
        times = {t0} | {b["t"] for b in batches if b["round"] == rnd}
        assert set(at) == times and all(n == size for n in at.values()), (rnd, at)
    dropped = [e for e in events if e["ev"] == "decision" and e["what"] == "drop_group"]
    assert len(dropped) >= len(batches)  # a batch only after a drop



def test_samples_are_scored_as_each_finishes(tmp_path: Path) -> None:
    """slime's generate_and_rm scores each sample as soon as it finishes, the group's
    samples gathered at once (RLsys-Foundation/APRIL@a72b585:slime/rollout/
    sglang_example.py:150, 161-163): a complete group is materialised when its slowest
    check ends plus the control node's time, at max(finish + verify_s) + materialize_s
    over its samples (a carried group's earlier ones too), not after K checks in turn;
    it is complete at its last finish."""
    events, _ = run(tmp_path, workload="lsat-ar", rounds=2)
    materialize_s = events[0]["sim_params"]["materialize_s"]
    finish = {(e["group"], e["sample"]): e["t"] for e in events
              if e["ev"] == "request_finish" and e["status"] == "finished"}
    complete = {e["group"]: e["t"] for e in events if e["ev"] == "group_complete"}
    checked = 0
    for e in events:
        if e["ev"] == "group_materialized":
            ends = [finish[e["group"], s] for s in e["samples"]]
            scored = max(t + v for t, v in zip(ends, e["verify_s"], strict=True))
            assert e["t"] == pytest.approx(scored + materialize_s, abs=2e-6), e["group"]
            assert complete[e["group"]] == max(ends)
            checked += 1
    assert checked >= 16  # every trained group, and the spares


def test_every_round_generates_and_a_spare_past_r_minus_1_is_discarded(
        tmp_path: Path) -> None:
    """R = 1, K = 2, no partial rollout: both groups' responses are in at 0.3105 s and
    group 0's checks end last, so it completes after the round has its one group. Kept as
    a spare it would fill round 1, which would end as it began (0 s: its rates NaN,
    test_properties); past R - 1 = 0 spares it is discarded, as slime drops it."""
    from harness.core.metrics import round_metrics
    from harness.run.execute import execute

    cfg = RunConfig(system="april", workload="sci-jl", seed=0, rounds=2, groups=1,
                    update_groups=1, group_size=2, max_response_tokens=64,
                    partial_rollout=False, dynamic_sampling=False)
    cfg.sim.rollout_engines, cfg.sim.rollout_tp, cfg.sim.placement = 1, 1, "disaggregated"
    cfg.sim.mem_fraction, cfg.sim.max_running, cfg.sim.verifier_workers = 0.2, 8, 0
    cfg.sim.micro_batch_tokens, cfg.sim.weight_sync_s = 1024, 0.0
    execute(cfg.validate(), tmp_path / "t.jsonl")
    events = read_trace(tmp_path / "t.jsonl")
    discards = [(e["t"], e["groups"]) for e in events
                if e["ev"] == "decision" and e["what"] == "discard_groups"]
    assert discards[0] == (pytest.approx(0.479354), [0])
    assert [e["groups"] for e in events if e["ev"] == "batch_dispatch"] == [[1], [2]]
    for row in round_metrics(events):
        assert row["rollout_complete_s"] > 0 and row["batch_tokens_per_s"] > 0
