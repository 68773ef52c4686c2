"""verl's static, group-contiguous split of a round over its replicas
(harness/sim/dispatch.py), against the least-loaded router, worked by hand."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from harness.cli.app import app
from harness.core.runtime import Prompt, Request
from harness.core.trace_io import read_bytes as trace_bytes
from harness.sim.dispatch import RoundRobin, StaticSplit, dispatch_of
from harness.sim.placement import LeastLoaded


def _req(round_: int, group: int, sample: int) -> Request:
    return Request(round_, group, sample, Prompt(group, 10), 16)


def test_static_split_cuts_a_round_into_contiguous_chunks() -> None:
    # N = 8 sequences (2 groups x 4) over 3 replicas: torch.chunk sizes 3, 3, 2
    split = StaticSplit(3, 8)
    got = [split.take(_req(0, g, s)) for g in range(2) for s in range(4)]
    assert got == [0, 0, 0, 1, 1, 1, 2, 2]
    assert split.counts == [3, 3, 2]
    # the next round starts again at replica 0, whatever is still outstanding
    assert [split.take(_req(1, 2, s)) for s in range(4)] == [0, 0, 0, 1]
    # the least-loaded router, nothing returned yet, deals them round-robin
    least = LeastLoaded(3)
    assert [least.take(_req(0, g, s)) for g in range(2) for s in range(4)] == \
        [0, 1, 2, 0, 1, 2, 0, 1]


def test_a_request_moved_again_keeps_its_replica() -> None:
    split = StaticSplit(2, 4)
    first = [split.take(_req(0, 0, s)) for s in range(4)]
    assert first == [0, 0, 1, 1]
    split.give_back(1)
    assert split.take(_req(0, 0, 3)) == 1  # dispatched again: the same replica


def test_verl_dispatches_statically_and_the_rest_least_loaded() -> None:
    assert dispatch_of("auto", "verl") == "static"
    assert dispatch_of("auto", "verl-fully-async") == "round-robin"
    assert dispatch_of("auto", "verl-one-step-off") == "least-loaded"
    assert dispatch_of("auto", "slime") == "least-loaded"
    assert dispatch_of("least-loaded", "verl") == "least-loaded"


def test_round_robin_ignores_what_each_replica_still_holds() -> None:
    robin, least = RoundRobin(3), LeastLoaded(3)
    assert [robin.take(_req(0, 0, s)) for s in range(4)] == [0, 1, 2, 0]
    assert [least.take(_req(0, 0, s)) for s in range(4)] == [0, 1, 2, 0]
    for router in (robin, least):  # replica 1 and replica 2 finish theirs
        router.give_back(1)
        router.give_back(2)
    # round robin goes on to 1, 2, 0; least-loaded fills the emptied 1 and 2 first
    assert [robin.take(_req(0, 1, s)) for s in range(3)] == [1, 2, 0]
    assert [least.take(_req(0, 1, s)) for s in range(3)] == [1, 2, 1]


def _engines_of_round0(tmp_path: Path, *extra: str) -> list[int]:
    out = tmp_path / "run"
    args = ["run", "--system", "verl", "--workload", "sci-jl", "-R", "2", "-K", "4", "-U", "2",
            "--rounds", "1", "--out", str(out), "--set", "sim.rollout_engines=2",
            "--set", "sim.rollout_tp=1", *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    text = trace_bytes(out / "trace.jsonl.zst").decode()
    events = [json.loads(line) for line in text.splitlines()]
    subs = [e for e in events if e["ev"] == "request_submit"]
    return [e["engine"] for e in sorted(subs, key=lambda e: (e["group"], e["sample"]))]


def test_a_verl_run_puts_each_group_on_one_replica(tmp_path: Path) -> None:
    # R 2 x K 4 = 8 sequences over 2 replicas: group 0 on replica 0, group 1 on replica 1
    assert _engines_of_round0(tmp_path) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert _engines_of_round0(tmp_path / "b", "--set", "sim.dispatch=least-loaded") == \
        [0, 1, 0, 1, 0, 1, 0, 1]


def test_a_bad_dispatch_is_one_line_naming_the_field(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["run", "--out", str(tmp_path / "o"), "--set",
                                      "sim.dispatch=random"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: --set sim.dispatch: must be auto, least-loaded, static or round-robin, "
        "not 'random'"]


def test_static_split_without_a_request_is_least_loaded_on_today_s_counts() -> None:
    # the split keeps no heap of its own: `take()` with no request reads the counts now
    split = StaticSplit(3, 6)
    assert [split.take(_req(0, 0, s)) for s in range(6)] == [0, 0, 1, 1, 2, 2]
    for index in (1, 1, 2):
        split.give_back(index)
    assert split.counts == [2, 0, 1]
    assert split.take() == 1 and split.take() == 1 and split.take() == 2
    assert split.counts == [2, 2, 2]
