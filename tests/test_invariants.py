"""Scheduling invariants every simulated trace must keep, per system.

Each system runs once (small: R=16 groups of K=8, U=2, two rounds) and the
tests read its trace. Also: byte-for-byte determinism, and the engine's KV
accounting under preemption.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from harness.core.config import RunConfig
from harness.core.runtime import Runtime
from harness.core.trace import read_trace
from harness.run.execute import execute
from harness.sim.runtime import SimRuntime
from systems.slime import Slime

SYSTEMS = ("slime", "cgp", "cgp-fgd")
GROUPS, ROUNDS, U, K, FRONTIER = 16, 2, 2, 8, 3


def config(system: str, **changes: Any) -> RunConfig:
    cfg = RunConfig(system=system, workload="sci-jl", groups=GROUPS, rounds=ROUNDS,
                    update_groups=U, group_size=K, frontier=FRONTIER)
    for key, value in changes.items():
        if key.startswith("sim."):
            setattr(cfg.sim, key[4:], value)
        else:
            setattr(cfg, key, value)
    return cfg.validate()


def run(tmp: Path, system: str, name: str = "trace", **changes: Any) -> list[dict[str, Any]]:
    path = tmp / f"{system}-{name}.jsonl"
    execute(config(system, **changes), path)
    return read_trace(path)


@pytest.fixture(scope="module", params=SYSTEMS)
def trace(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
          ) -> list[dict[str, Any]]:
    return run(tmp_path_factory.mktemp(request.param), request.param)


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["ev"] == kind]


def round_groups(events: list[dict[str, Any]]) -> dict[int, set[int]]:
    out: dict[int, set[int]] = defaultdict(set)
    for e in of(events, "request_submit"):
        out[e["round"]].add(e["group"])
    return out


def index(events: list[dict[str, Any]], kind: str, **match: Any) -> int:
    """Position of the single event of `kind` with the given fields."""
    hits = [i for i, e in enumerate(events)
            if e["ev"] == kind and all(e.get(k) == v for k, v in match.items())]
    assert len(hits) == 1, (kind, match, len(hits))
    return hits[0]


# -- structure ---------------------------------------------------------------


def assert_framed(trace: list[dict[str, Any]], rounds: int) -> None:
    """run_start first, run_end last without an error, time never going back, and
    every round started and completed (shared by the per-system test files)."""
    assert trace[0]["ev"] == "run_start" and trace[-1]["ev"] == "run_end"
    assert "error" not in trace[-1]
    times = [e["t"] for e in trace]
    assert times == sorted(times)
    assert len(of(trace, "rollout_start")) == len(of(trace, "rollout_complete")) == rounds


def test_trace_is_framed_and_time_ordered(trace: list[dict[str, Any]]) -> None:
    assert_framed(trace, ROUNDS)


def test_every_group_of_a_round_is_in_exactly_one_batch(trace: list[dict[str, Any]]) -> None:
    groups = round_groups(trace)
    assert sorted(groups) == list(range(ROUNDS))
    dispatched = Counter(g for e in of(trace, "batch_dispatch") for g in e["groups"])
    for rnd, gs in groups.items():
        assert len(gs) == GROUPS
        assert all(dispatched[g] == 1 for g in gs), rnd
    assert set(dispatched) == set().union(*groups.values())
    # and a batch holds groups of one round only, dispatched within that round
    starts = {e["round"]: i for i, e in enumerate(trace) if e["ev"] == "rollout_start"}
    for i, e in enumerate(trace):
        if e["ev"] == "batch_dispatch":
            (rnd,) = {r for r, gs in groups.items() if set(e["groups"]) <= gs}
            assert starts[rnd] < i < starts.get(rnd + 1, len(trace))


def test_group_ids_are_unique_across_the_run(trace: list[dict[str, Any]]) -> None:
    groups = round_groups(trace)
    assert len(set().union(*groups.values())) == GROUPS * ROUNDS
    batches = [e["batch"] for e in of(trace, "batch_dispatch")]
    assert len(batches) == len(set(batches)) == GROUPS * ROUNDS // U


def test_every_request_finishes_exactly_once(trace: list[dict[str, Any]]) -> None:
    submitted = Counter((e["group"], e["sample"]) for e in of(trace, "request_submit"))
    finished = Counter((e["group"], e["sample"]) for e in of(trace, "request_finish"))
    assert set(submitted.values()) == {1}
    assert finished == submitted
    assert len(submitted) == GROUPS * ROUNDS * K
    assert {e["status"] for e in of(trace, "request_finish")} == {"finished"}
    assert set(Counter(s for _, s in submitted).values()) == {GROUPS * ROUNDS}  # K samples each


def test_trainer_spans_never_overlap(trace: list[dict[str, Any]]) -> None:
    open_batch: int | None = None
    last_end = 0.0
    spans = 0
    for e in trace:
        if e["ev"] == "train_start":
            assert open_batch is None, "a span started while another was open"
            assert e["t"] >= last_end
            open_batch = e["batch"]
        elif e["ev"] == "train_end":
            assert open_batch == e["batch"]
            open_batch, last_end = None, e["t"]
            spans += 1
    assert open_batch is None and spans == GROUPS * ROUNDS // U


def test_one_optimizer_step_per_batch(trace: list[dict[str, Any]]) -> None:
    dispatches = of(trace, "batch_dispatch")
    assert all(len(e["groups"]) == U for e in dispatches)
    steps = of(trace, "optimizer_step")
    assert len(steps) == len(dispatches)
    assert [e["version"] for e in steps] == list(range(1, len(steps) + 1))
    assert [e["step"] for e in steps] == list(range(1, len(steps) + 1))
    # each step follows its batch's train_end and precedes the next batch's train_start
    for n, d in enumerate(dispatches):
        end = index(trace, "train_end", batch=d["batch"])
        step = index(trace, "optimizer_step", step=n + 1)
        assert end < step
        if n + 1 < len(dispatches):
            assert step < index(trace, "train_start", batch=dispatches[n + 1]["batch"])


def test_weights_published_once_per_round_after_its_last_step(
    trace: list[dict[str, Any]]
) -> None:
    published = [i for i, e in enumerate(trace) if e["ev"] == "weights_published"]
    assert len(published) == ROUNDS
    per_round = GROUPS // U
    for rnd, i in enumerate(published):
        last_step = index(trace, "optimizer_step", step=(rnd + 1) * per_round)
        assert last_step < i
        assert trace[i]["version"] == trace[last_step]["version"] == (rnd + 1) * per_round
        if rnd + 1 < ROUNDS:
            nxt = index(trace, "rollout_start", round=rnd + 1)
            assert i < nxt
            assert trace[nxt]["version"] == trace[i]["version"]
            # no step of the next round happens before its rollout starts
            assert index(trace, "optimizer_step", step=(rnd + 1) * per_round + 1) > nxt


def test_tokens_carry_the_rounds_policy_version(trace: list[dict[str, Any]]) -> None:
    version = {e["round"]: e["version"] for e in of(trace, "rollout_start")}
    assert version == {r: r * GROUPS // U for r in range(ROUNDS)}
    group_round = {e["group"]: e["round"] for e in of(trace, "request_submit")}
    for e in of(trace, "request_finish"):
        v = version[group_round[e["group"]]]
        assert e["versions"] == [v, v]
        assert e["version_spans"] == [[v, e["response_tokens"]]]


def test_system_specific_dispatch_rules(trace: list[dict[str, Any]]) -> None:
    system = trace[0]["system"]
    for rnd in range(ROUNDS):
        start = index(trace, "rollout_start", round=rnd)
        done = index(trace, "rollout_complete", round=rnd)
        first = min(i for i, e in enumerate(trace) if e["ev"] == "batch_dispatch" and i > start)
        if system == "slime":
            assert first > done
            assert trace[first]["t"] >= trace[done]["t"]
        else:  # CGP pipelines: with R >= 16 the first batch leaves before the rollout ends
            assert first < done
            assert trace[first]["t"] < trace[done]["t"]


def test_frontier_bounds_groups_in_service(trace: list[dict[str, Any]]) -> None:
    """A group is in service from its first request_submit to its group_complete."""
    in_service: set[int] = set()
    seen: set[int] = set()
    peak = 0
    for e in trace:
        if e["ev"] == "request_submit" and e["group"] not in seen:
            seen.add(e["group"])
            in_service.add(e["group"])
            peak = max(peak, len(in_service))
        elif e["ev"] == "group_complete":
            in_service.discard(e["group"])
    if trace[0]["system"] == "cgp-fgd":
        assert peak == FRONTIER
        admits = [e["group"] for e in of(trace, "decision") if e["what"] == "frontier_admit"]
        assert admits == sorted(admits) == sorted(seen)  # lowest order first
    else:
        assert peak == GROUPS  # everything is submitted at once


# -- determinism ---------------------------------------------------------------


@pytest.mark.parametrize("system", SYSTEMS)
def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path, system: str) -> None:
    paths = [tmp_path / f"{n}.jsonl" for n in ("a", "b", "c")]
    execute(config(system, seed=7), paths[0])
    execute(config(system, seed=7), paths[1])
    execute(config(system, seed=8), paths[2])
    a, b, c = (p.read_bytes() for p in paths)
    assert a == b
    assert a != c
    # rerunning into an existing file replaces it rather than appending
    execute(config(system, seed=7), paths[2])
    assert paths[2].read_bytes() == a


# -- KV accounting under preemption --------------------------------------------


@pytest.mark.parametrize("system", ["slime", "cgp-fgd"])
def test_preemption_keeps_every_response_whole(tmp_path: Path, system: str) -> None:
    roomy = run(tmp_path, system)
    tight = run(tmp_path, system, "tight", **{"sim.mem_fraction": 0.12})
    assert not of(roomy, "request_preempt")
    preempts = of(tight, "request_preempt")
    assert preempts, "mem_fraction=0.12 should force preemptions"
    assert tight[-1]["preemptions"] == len(preempts)

    def tokens(events: list[dict[str, Any]]) -> dict[tuple[int, int], int]:
        return {(e["group"], e["sample"]): e["response_tokens"]
                for e in of(events, "request_finish")}

    assert {e["status"] for e in of(tight, "request_finish")} == {"finished"}
    assert tokens(tight) == tokens(roomy)
    assert len(tokens(tight)) == GROUPS * ROUNDS * K
    # a preempted request is readmitted (once more per preemption) before it finishes
    admits = Counter((e["group"], e["sample"]) for e in of(tight, "request_admit"))
    evicted = Counter((e["group"], e["sample"]) for e in preempts)
    for key, n in admits.items():
        assert n == 1 + evicted[key]
    for e in of(tight, "request_finish"):
        assert sum(n for _, n in e["version_spans"]) == e["response_tokens"]


class _Watched(Slime):
    """Slime plus a probe that reads the engine's load every 50 ms of sim time."""

    async def run(self, rt: Runtime) -> None:
        self.kv: list[float] = []
        self.waiting: list[int] = []
        done = False

        async def watch() -> None:
            while not done:
                load = rt.engine.load()
                self.kv.append(load.kv_used)
                self.waiting.append(load.waiting)
                await rt.sleep(0.05)

        probe = rt.spawn(watch())
        await super().run(rt)
        done = True
        await probe


def test_kv_cache_use_never_exceeds_capacity(tmp_path: Path) -> None:
    system = _Watched()
    SimRuntime(config("slime", **{"sim.mem_fraction": 0.12}), tmp_path / "t.jsonl").run(system)
    assert max(system.kv) <= 1.0
    assert max(system.kv) > 0.9  # the small cache really was filled
    assert max(system.waiting) > 0  # and requests queued for it
    assert system.waiting[-1] == 0
