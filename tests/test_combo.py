"""cgp-april (systems/cgp_april.py): APRIL's partial rollouts with CGP's hand-off.

Trace invariants on the simulator: every group is trained exactly once or is
still carried (or was discarded) when the run ends; each round trains R groups
in R/U batches that leave while the rollout still runs; versions only move
forward, and within a round every trained token comes from the round's
weights or older ones (carried-over work).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_invariants import assert_framed, of, round_groups

from harness.core.config import RunConfig
from harness.core.trace import read_trace
from harness.sim.runtime import SimRuntime
from systems.cgp_april import CGPAPRIL

GROUPS, U, K, ROUNDS, OVER = 16, 2, 8, 4, 24


def run(tmp_path: Path, name: str = "trace", **over: Any) -> tuple[list[dict], CGPAPRIL]:
    cfg = RunConfig(system="cgp-april", workload="sci-jl", groups=GROUPS, update_groups=U,
                    group_size=K, rounds=ROUNDS, over_sampling_groups=OVER, seed=1)
    for key, value in over.items():
        setattr(cfg, key, value)
    system = CGPAPRIL()
    path = tmp_path / f"{name}.jsonl"
    SimRuntime(cfg.validate(), path).run(system)
    return read_trace(path), system


@pytest.fixture(scope="module")
def carried(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], CGPAPRIL]:
    return run(tmp_path_factory.mktemp("cgp-april"))


def test_trace_is_framed_and_time_ordered(carried: tuple[list[dict], CGPAPRIL]) -> None:
    events, _ = carried
    assert_framed(events, ROUNDS)


def test_every_group_is_trained_once_or_still_carried(
    carried: tuple[list[dict], CGPAPRIL]
) -> None:
    events, system = carried
    submitted = set().union(*round_groups(events).values())
    trained = Counter(g for e in of(events, "batch_dispatch") for g in e["groups"])
    assert set(trained.values()) == {1}
    left = {w.group.id for w in system.carried} | {g.id for g in system.spare}
    assert not left & set(trained)
    assert set(trained) | left == submitted
    assert left, "over-sampling 1.5 x R should leave work in flight at the end"
    assert not [e for e in of(events, "decision") if e["what"] == "discard_groups"]


def test_each_round_hands_r_groups_over_in_u_group_batches_during_the_rollout(
    carried: tuple[list[dict], CGPAPRIL]
) -> None:
    events, _ = carried
    dispatches = of(events, "batch_dispatch")
    assert len(dispatches) == ROUNDS * GROUPS // U
    assert all(len(e["groups"]) == U for e in dispatches)
    starts = [i for i, e in enumerate(events) if e["ev"] == "rollout_start"]
    done = [i for i, e in enumerate(events) if e["ev"] == "rollout_complete"]
    for rnd, (a, b) in enumerate(zip(starts, done, strict=True)):
        end = starts[rnd + 1] if rnd + 1 < ROUNDS else len(events)
        batches = [i for i in range(a, end) if events[i]["ev"] == "batch_dispatch"]
        assert len(batches) == GROUPS // U
        assert batches[0] < b, f"round {rnd}: CGP hands the first batch over before the end"


def test_versions_only_move_forward(carried: tuple[list[dict], CGPAPRIL]) -> None:
    events, _ = carried
    steps = of(events, "optimizer_step")
    assert [e["version"] for e in steps] == list(range(1, len(steps) + 1))
    published = [e["version"] for e in of(events, "weights_published")]
    assert published == [(r + 1) * GROUPS // U for r in range(ROUNDS)]
    starts = [e["version"] for e in of(events, "rollout_start")]
    assert starts == [r * GROUPS // U for r in range(ROUNDS)]  # weights fixed in a round
    for e in of(events, "request_finish"):
        versions = [v for v, _ in e["version_spans"]]
        assert versions == sorted(versions)
        assert sum(n for _, n in e["version_spans"]) == e["response_tokens"]


def test_trained_tokens_never_come_from_a_newer_policy(
    carried: tuple[list[dict], CGPAPRIL]
) -> None:
    events, _ = carried
    spans = {(e["group"], e["sample"]): e["version_spans"] for e in of(events, "request_finish")
             if e["status"] == "finished"}
    version = 0
    older = 0
    for e in events:
        if e["ev"] == "rollout_start":
            version = e["version"]
        elif e["ev"] == "batch_dispatch":
            for g in e["groups"]:
                for s in range(K):
                    assert all(v <= version for v, _ in spans[(g, s)])
                    older += any(v < version for v, _ in spans[(g, s)])
    assert older, "carried-over tokens are off-policy"


def test_partial_responses_are_resumed(carried: tuple[list[dict], CGPAPRIL]) -> None:
    events, _ = carried
    assert [e for e in of(events, "request_finish") if e["status"] == "aborted"]
    assert [e for e in of(events, "request_submit") if e.get("resumed_tokens", 0) > 0]


def test_without_partial_rollout_stopped_groups_are_discarded(tmp_path: Path) -> None:
    events, system = run(tmp_path, partial_rollout=False)
    submitted = set().union(*round_groups(events).values())
    trained = Counter(g for e in of(events, "batch_dispatch") for g in e["groups"])
    assert set(trained.values()) == {1}
    dropped = {g for e in of(events, "decision") if e["what"] == "discard_groups"
               for g in e["groups"]}
    assert dropped and not system.carried
    assert set(trained) | dropped | {g.id for g in system.spare} == submitted
    assert all(len(e["version_spans"]) <= 1 for e in of(events, "request_finish"))


def test_without_over_sampling_it_is_cgp(tmp_path: Path) -> None:
    """R groups in flight: nothing is aborted and every round trains its own R groups."""
    events, system = run(tmp_path, over_sampling_groups=0)
    assert {e["status"] for e in of(events, "request_finish")} == {"finished"}
    groups = round_groups(events)
    assert all(len(gs) == GROUPS for gs in groups.values())
    for e in of(events, "batch_dispatch"):
        assert any(set(e["groups"]) <= gs for gs in groups.values())
    assert not system.carried and not system.spare
