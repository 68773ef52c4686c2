"""Colocated placement: engine and trainer take turns on the same GPUs.

The model (harness/sim/placement.py, GpuShare): the trainer takes the GPUs only
when no request is running, possibly mid-rollout; while it has or is taking
them, new requests wait; when its call ends with requests waiting, the GPUs go
back to the engine before its next call. Pipelined systems (cgp-fgd, cgp-april)
used to deadlock: a request submitted while the trainer was still taking the
GPUs was forgotten, and the GPUs never came back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.cli.common import build_config
from harness.core.trace import read_trace
from harness.run.execute import execute
from systems import system_names

SMALL = ["workload=sci-jl", "seed=0", "group_size=2", "sim.rollout_tp=1", "sim.max_running=2",
         "sim.mem_fraction=0.2", "sim.micro_batch_tokens=1024", "sim.weight_sync_s=0.5",
         "sim.placement=colocated"]
EPS = 1e-9


def run(tmp_path: Path, sets: list[str]) -> list[dict[str, Any]]:
    path = tmp_path / "trace.jsonl"
    execute(build_config(None, sets), path)
    trace = read_trace(path, strict=True)
    assert "error" not in trace[-1], trace[-1]
    return trace


def check_turns(trace: list[dict[str, Any]]) -> int:
    """Replay the hand-overs; returns how many went back to the engine."""
    header = trace[0]
    switch_s = header["sim_params"]["switch_s"]
    sim = header["config"]["sim"]
    pool = sim["rollout_engines"] * sim["rollout_tp"]
    owner, since = "engine", 0.0  # the GPUs are the owner's from `since` on
    running: set[tuple[int, int, int]] = set()  # (engine, group, sample)
    where: dict[tuple[int, int], int] = {}
    outstanding: set[tuple[int, int]] = set()
    owed = False  # a trainer call ended with requests waiting: the engine's turn
    full = False  # the trainer call under way has all the GPUs
    back = 0
    for e in trace:
        ev, t = e["ev"], e["t"]
        key = (e.get("group"), e.get("sample"))
        if ev == "placement_switch":
            if e["to"] == "trainer":
                assert owner == "engine" and not running, (e, running)
            else:
                assert owner == "trainer", e
                back += 1
                owed = False
            owner, since = e["to"], t + switch_s
        elif ev == "request_submit":
            outstanding.add(key)
            where[key] = e["engine"]
        elif ev == "request_admit":
            assert owner == "engine" and t >= since - EPS, e
            running.add((e["engine"], *key))
        elif ev in ("request_finish", "request_preempt"):
            running.discard((where[key], *key))
            if ev == "request_finish":
                outstanding.discard(key)
                owed = owed and bool(outstanding)  # aborted: nothing waits any more
        elif ev in ("train_start", "optimizer_step"):
            full = ev == "optimizer_step" or e["gpus"] == pool
            if not full:
                continue  # on GPUs the engine released (RollPacker's stream trainer)
            assert owner == "trainer" and t >= since - EPS, e
            assert not owed, f"the trainer kept the GPUs while requests waited: {e}"
            owed = ev == "optimizer_step" and bool(outstanding)  # the call ends
        elif ev == "train_end" and full:
            owed = bool(outstanding)
    return back


@pytest.mark.parametrize("frontier", [1, 2, 3])
def test_cgp_fgd_colocated_takes_turns(tmp_path: Path, frontier: int) -> None:
    trace = run(tmp_path, [*SMALL, "system=cgp-fgd", "rounds=2", "groups=4",
                           "update_groups=1", f"frontier={frontier}"])
    assert len([e for e in trace if e["ev"] == "optimizer_step"]) == 8
    check_turns(trace)


def test_cgp_fgd_frontier_1_gets_the_gpus_back_mid_rollout(tmp_path: Path) -> None:
    """The reported case: the trainer takes the GPUs between two groups; the next
    group waits for the train call, then the engine gets them back."""
    trace = run(tmp_path, ["system=cgp-fgd", "frontier=1", "rounds=1", "groups=8",
                           "sim.placement=colocated"])
    assert check_turns(trace) >= 1
    switches = [i for i, e in enumerate(trace) if e["ev"] == "placement_switch"]
    done = next(i for i, e in enumerate(trace) if e["ev"] == "rollout_complete")
    assert any(trace[i]["to"] == "engine" and i < done for i in switches)


@pytest.mark.parametrize("partial", ["true", "false"])
def test_cgp_april_dynamic_sampling_colocated(tmp_path: Path, partial: str) -> None:
    trace = run(tmp_path, [*SMALL, "system=cgp-april", "rounds=2", "groups=2",
                           "update_groups=1", "dynamic_sampling=true",
                           f"partial_rollout={partial}"])
    check_turns(trace)


def _colocates(system: str) -> bool:
    """Its source runs colocated (slime-async's refuses to: `placements`)."""
    from systems import SYSTEMS

    return "colocated" in getattr(SYSTEMS[system], "placements", ("colocated",))


@pytest.mark.parametrize("system", [s for s in system_names() if _colocates(s)])
@pytest.mark.parametrize("engines", [1, 2])
def test_every_system_runs_colocated(tmp_path: Path, system: str, engines: int) -> None:
    trace = run(tmp_path, [*SMALL, f"system={system}", "rounds=2", "groups=4",
                           "update_groups=2", f"sim.rollout_engines={engines}"])
    check_turns(trace)
