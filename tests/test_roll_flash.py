"""roll-flash (systems/roll_flash.py): its schedule worked out by hand on a scripted
runtime, its pure rules by hand, and its knobs' refusals.

The scripted runtime is the contract and nothing more, on an asyncio loop whose clock
jumps to the next timer (tests/clocks.py): every sequence makes one token a second however
many run, a training step takes 1 s, scoring, materialising and publishing take none. So
each time below is a sum of response lengths and training seconds."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from harness.core.config import ConfigError, RunConfig
from harness.core.runtime import Group, Request, Response
from harness.core.trace import read_trace
from harness.run.execute import execute
from harness.studies.analytic.roll_flash import (
    generation_bounds,
    in_flight,
    steady_means,
    step_bounds,
    step_rows,
)
from systems.roll_flash import RollFlash, oldest_quota, window
from systems.staleness_gate import CapacityGate
from tests.async_trace import token_lags
from tests.async_view import batches, live_run, starts
from tests.clocks import VirtualAsyncio
from tests.scripted import ScriptedRuntimeBase


class ScriptedEngine:
    def __init__(self, rt: ScriptedRuntime, lengths: dict[tuple[int, int], int]) -> None:
        self.rt, self.lengths = rt, lengths
        self.version, self.replicas = 0, 1
        self.live: dict[str, tuple[Request, float, asyncio.Future[Response], Any]] = {}

    def _response(self, request: Request, made: int, status: str) -> Response:
        before = request.resume.version_spans if request.resume else []
        spans = [*before, [self.version, made]] if made else list(before)
        done = (request.resume.tokens if request.resume else 0) + made
        return Response(request, done, spans, status)  # type: ignore[arg-type]

    def submit(self, request: Request) -> asyncio.Future[Response]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Response] = loop.create_future()
        done = request.resume.tokens if request.resume else 0
        left = self.lengths[(request.group, request.sample)] - done
        self.rt.log("submit", group=request.group, sample=request.sample, resumed=done)

        def finish() -> None:
            self.live.pop(request.id)
            future.set_result(self._response(request, left, "finished"))

        self.live[request.id] = (request, loop.time(), future, loop.call_later(left, finish))
        return future

    async def abort(self, ids: Any) -> list[Response]:
        out = []
        for rid in list(ids):
            if rid not in self.live:
                continue
            request, began, future, timer = self.live.pop(rid)
            timer.cancel()
            response = self._response(request, round(self.rt.now() - began), "aborted")
            future.set_result(response)
            out.append(response)
        return out


class ScriptedTrainer:
    def __init__(self, rt: ScriptedRuntime) -> None:
        self.rt, self.version, self.gpus = rt, 0, 1

    async def train(self, batch: int, groups: Any, gpus: int | None = None) -> None:
        await asyncio.sleep(1.0)

    async def step(self) -> int:
        self.version += 1
        return self.version

    async def publish(self, in_flight: bool = False, recompute: bool = False) -> None:
        self.rt.engine.version = self.version
        self.rt.log("publish", version=self.version)


class ScriptedRuntime(ScriptedRuntimeBase):
    def __init__(self, cfg: RunConfig, lengths: dict[tuple[int, int], int]) -> None:
        super().__init__(cfg)
        self.engine = ScriptedEngine(self, lengths)
        self.trainer = ScriptedTrainer(self)

    async def materialize(self, group: Group) -> None:
        self.log("group_materialized", group=group.id)


def run(lengths: dict[tuple[int, int], int], **knobs: Any) -> ScriptedRuntime:
    cfg = RunConfig(system="roll-flash", groups=3, update_groups=1, group_size=2, rounds=1)
    for name, value in knobs.items():
        setattr(cfg.roll_flash, name, value)
    rt = ScriptedRuntime(cfg, lengths)
    loop = VirtualAsyncio()
    try:
        loop.run_until_complete(RollFlash().run(rt))  # type: ignore[arg-type]
    finally:
        loop.close()
    return rt


# g0 ends at 4 s, g1 at 10 s (its sample 0 is 10 tokens long), g2 takes 1 s
LENGTHS = {(0, 0): 2, (0, 1): 4, (1, 0): 10, (1, 1): 1, (2, 0): 1, (2, 1): 1}


def test_a_batch_waits_for_the_oldest_step_worked_by_hand() -> None:
    """Ratio 1, B = 1, K = 2, 3 steps. Step 0's budget is ceil(1 x 1) + 1 = 2 groups: g0
    and g1 start at 0 s. Step 0 takes the first committed, g0 at 4 s, and trains 4-5 s.
    The pause at 5 s aborts g1's sample 0 after 5 of its 10 tokens; it goes on with them
    under v1 and ends at 10 s. Step 1's budget is 3: g2 starts at 5 s and is done at 6 s,
    but step 1 takes from the oldest step of its window [0, 1] first and waits for g1:
    g1 at 10 s, trained 10-11 s. Step 2 takes g2 at 11 s, trained 11-12 s. AReaL's gate
    (the same budget) would have trained g2 at 6 s."""
    rt = run(LENGTHS)
    dispatch = [(t, f["groups"]) for t, ev, f in rt.events if ev == "batch_dispatch"]
    assert dispatch == [(4.0, [0]), (10.0, [1]), (11.0, [2])]
    first = {f["group"]: t for t, ev, f in rt.events if ev == "submit" and f["resumed"] == 0
             and f["sample"] == 0}
    assert first == {0: 0.0, 1: 0.0, 2: 5.0}
    resumed = [(t, f["group"], f["resumed"]) for t, ev, f in rt.events
               if ev == "submit" and f["resumed"]]
    assert resumed == [(5.0, 1, 5)]
    interrupts = [(t, f["requests"]) for t, ev, f in rt.events if ev == "decision"
                  and f["what"] == "interrupt"]
    assert interrupts == [(5.0, 1), (11.0, 0)]  # none after the last step


def test_ratio_zero_is_rolls_synchronous_pipeline_worked_by_hand() -> None:
    """Ratio 0: the budget is the step's one group. g0 runs 0-4 s, trains 4-5 s; g1 starts
    only once the weights are v1 at 5 s and ends at 15 s; g2 runs 16-17 s. Nothing is
    ever in flight at an update."""
    rt = run(LENGTHS, async_generation_ratio=0.0)
    dispatch = [(t, f["groups"]) for t, ev, f in rt.events if ev == "batch_dispatch"]
    assert dispatch == [(4.0, [0]), (15.0, [1]), (17.0, [2])]
    assert all(f["requests"] == 0 for _, ev, f in rt.events
               if ev == "decision" and f["what"] == "interrupt")


def test_the_request_cap_holds_each_request_for_a_credit_worked_by_hand() -> None:
    """One request in flight at a time (max_running_requests = 1, one replica), ratio 0:
    g0's samples run 0-2 s then 2-6 s; trained 6-7 s; g1's 7-17 s and 17-18 s, trained
    18-19 s; g2's 19-20 and 20-21 s, trained 21-22 s."""
    rt = run(LENGTHS, async_generation_ratio=0.0, max_running_requests=1)
    dispatch = [t for t, ev, _ in rt.events if ev == "batch_dispatch"]
    assert dispatch == [6.0, 18.0, 21.0]


def test_the_window_and_the_oldest_steps_share_by_hand() -> None:
    assert [window(r) for r in (0, 1, 1.5, 2, 4)] == [0, 1, 2, 2, 4]
    # ratio 1.5, B = 4, K = 2: int(4 x 2 x 0.5) = 4 samples = 2 groups from the oldest step
    assert oldest_quota(1.5, 4, 2) == 2
    # B = 3, K = 2: int(3 x 2 x 0.5) = 3 samples, whole groups: 2 (ItemsGroup pops a
    # whole prompt while fewer than 3 samples are collected)
    assert oldest_quota(1.5, 3, 2) == 2
    assert oldest_quota(1.25, 4, 8) == 1  # int(32 x 0.25) = 8 samples: 1 group
    assert oldest_quota(2.0, 4, 8) == 4  # a whole ratio: the step's whole batch


def test_the_budget_is_rolls_ceil_ratio_b_plus_steps_times_b() -> None:
    # ROLL: batch_size = ceil(B x ratio) on the first step, + B each step (G:236-239)
    gate = CapacityGate(1 << 30, 3, 1.5)
    assert gate.capacity(0) == 5 + 3  # ceil(4.5) + 1 x 3
    for _ in range(7):
        gate.submit()
    assert gate.capacity(0) == 1 and gate.capacity(1) == 4
    gate.drop()  # a group given up frees its place
    assert gate.capacity(0) == 2
    assert CapacityGate(8, 2, 1).capacity(0) == 4  # a whole ratio: AReaL's arithmetic


def test_staleness_bound_is_ceil_ratio() -> None:
    cfg = RunConfig(system="roll-flash")
    assert RollFlash().staleness_bound(cfg) == 1  # ROLL's async example's ratio 1
    cfg.roll_flash.async_generation_ratio = 1.5
    assert RollFlash().staleness_bound(cfg) == 2
    cfg.update_groups, cfg.group_size = 3, 4
    assert RollFlash().backlog_bound(cfg) == (5 + 3) * 4  # ceil(4.5) + 3 groups of 4


@pytest.mark.parametrize(("field", "value", "says"), [
    ("async_generation_ratio", 0.5, "must be 0 (synchronous) or >= 1"),
    ("async_generation_ratio", -1.0, "must be 0 (synchronous) or >= 1"),
    ("max_running_requests", 0, "must be >= 1"),
])
def test_bad_knobs_are_refused_naming_them(field: str, value: Any, says: str) -> None:
    cfg = RunConfig(system="roll-flash")
    setattr(cfg.roll_flash, field, value)
    with pytest.raises(ConfigError, match=re.escape(f"--set roll_flash.{field}: {says}")):
        cfg.validate()


def test_the_table_is_written_only_for_its_system_or_when_set() -> None:
    assert "roll_flash" not in RunConfig(system="areal").to_dict()
    assert "roll_flash" in RunConfig(system="roll-flash").to_dict()
    cfg = RunConfig(system="areal")
    cfg.roll_flash.max_running_requests = 64
    assert cfg.to_dict()["roll_flash"]["max_running_requests"] == 64


# -- the closed forms (harness/studies/analytic/roll_flash.py) -------------------------


def test_the_closed_forms_by_hand() -> None:
    # four samples of 1, 2, 3 and 4 s on two slots: at least max(10 / 2, 4) = 5 s; list
    # scheduling ends by 10 / 2 + (1 - 1/2) x 4 = 7 s
    assert generation_bounds([1, 2, 3, 4], 2) == (5.0, 7.0)
    # ratio 1, B = 8, K = 8: (ceil(8) + 8) x 8 = 128 samples at once, under 512 slots
    assert in_flight(512, 1, 8, 8) == 128 and in_flight(100, 1, 8, 8) == 100
    # a 40 s tail among 2 s samples, 4 live, window 1: Little's law gives max(5, 46 / 4)
    # = 11.5 s a step; the window 40 / 2 = 20 s
    b = step_bounds([40, 2, 2, 2], 4, 5.0, live=4, window=1)
    assert (b["gen_low_s"], b["gen_high_s"]) == (40.0, 41.5)
    assert (b["sync_low_s"], b["async_floor_s"], b["window_floor_s"]) == (45.0, 11.5, 20.0)


def test_the_bounds_hold_on_simulated_traces(tmp_path: Path) -> None:
    """Synchronous (ratio 0, every sample admitted at once): a step's generation is its
    longest sample, the lower bound exactly. Asynchronous (ratio 1): the mean step is
    above both floors."""
    for ratio in (0.0, 1.0):
        cfg = RunConfig(system="roll-flash", workload="sci-jl", groups=2, update_groups=2,
                        group_size=4, rounds=6)
        cfg.roll_flash.async_generation_ratio = ratio
        path = tmp_path / f"r{ratio}.jsonl"
        execute(cfg.validate(), path)
        rows = step_rows(read_trace(path))
        assert len(rows) == 6
        if ratio == 0:
            assert all(r.gen_s == pytest.approx(r.bounds["gen_low_s"]) for r in rows)
        means = steady_means(rows)
        assert means["step_s"] >= means["window_floor_s"] >= means["async_floor_s"]


@pytest.mark.live
@pytest.mark.slow
def test_live_run_keeps_the_budget_and_the_window(model_dir: Path, tmp_path: Path) -> None:
    """The same code on the live runtime (the tiny model, 4 groups of 4, U = 2, 2 rounds):
    4 steps, every started group trained, no token more than ceil(1) = 1 step stale, the
    n-th group started under version v only if n <= ceil(1 x 2) + (v + 1) x 2."""
    pytest.importorskip("vllm")
    events = live_run(model_dir, "roll-flash", tmp_path)
    assert events[-1]["ev"] == "run_end" and "error" not in events[-1]
    assert [e["version"] for e in events if e["ev"] == "optimizer_step"] == [1, 2, 3, 4]
    finished = {e["group"] for e in events if e["ev"] == "request_finish"
                and e["status"] == "finished"}
    assert sorted(g for _, groups in batches(events) for g in groups) == sorted(finished)
    assert max(token_lags(events)) <= 1
    assert all(x.order + 1 <= 2 + (x.version + 1) * 2 for x in starts(events))


def test_the_staleness_study_runs_it_with_its_bound(tmp_path: Path) -> None:
    """roll-flash in the staleness study (its knob from plan's ASYNC_STALENESS): ratio 0
    trains on-policy, ratio 1 within its bound of 1 step."""
    import pandas as pd

    from harness.studies.whatif import run_study

    spec = {"repeats": 1, "steps": 8, "systems": ["roll-flash"],
            "base": {"workload": "lsat-ar", "group_size": 4, "update_groups": 2,
                     "sim": {"model": "qwen3-1.7b", "rollout_gpu": "h100-sxm",
                             "trainer_gpu": "h100-sxm", "rollout_tp": 1}},
            "cluster": {"gpus": 8, "rollout_gpus": [4]}, "values": {"roll-flash": [0, 1]}}
    res = run_study("staleness", tmp_path, jobs=1, figures=tmp_path / "fig", spec=spec)
    assert res.failed == 0 and res.ran == 2
    by = pd.read_csv(tmp_path / "staleness" / "summary.csv").set_index("setting")
    assert by.loc["ratio=0", "lag_max"] == 0
    assert by.loc["ratio=1", "lag_max"] <= by.loc["ratio=1", "bound"] == 1
