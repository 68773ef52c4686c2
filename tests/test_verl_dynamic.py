"""verl's dynamic resource scheduling (systems/verl_dynamic.py, its policies in
systems/verl_dynamic_policy.py, the lend in harness/sim/placement.py and hybrid.py).

The policies by hand; the lend and reclaim on a probe whose times are worked out by hand
(a lend costs one hand-over plus the weights, a reclaim one hand-over; the trainer waits
while lent); the system on the small config: U = 2, B = 1, T = 4, so a sync trains
8 groups and the queue must hold int(0.3 x 8) = 2 before a reclaim.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.core.config import ConfigError, RunConfig
from harness.core.trace import read_trace
from harness.run.checks import check_run
from harness.run.execute import execute
from harness.sim import hybrid, switch, weight_sync
from systems.common import new_groups
from systems.verl_dynamic import VerlDynamic
from systems.verl_dynamic_policy import Context, Policy

# -- the policies, by hand --------------------------------------------------------------


def ctx(generated: int, expected: int, waits: list[float] | None = None,
        waited: list[int] | None = None) -> Context:
    """U x B = 4 groups a collection, T = 4: 16 groups a sync."""
    return Context(4, 4, generated, expected, waits or [], waited or [])


def test_the_reclaim_waits_for_a_share_of_a_sync() -> None:
    assert ctx(0, 0).step_required == 16
    assert Policy("default", 0.3).deactivate_wait(ctx(0, 0)) == 4  # int(4.8)
    assert Policy("fixed_ratio", 0.6).deactivate_wait(ctx(0, 0)) == 9  # int(9.6)
    assert Policy("static_fully_async", 0.6).deactivate_wait(ctx(0, 0)) == 0


def test_the_gate_weighs_the_gap_against_the_switch() -> None:
    """gap = 0.3 x 16 - (17 - 16) = 3.8 groups. Before any signal a group costs 1000 s:
    3,800 s > 10 s, lend. Waits of 6 s for 3 groups: 2 s a group, 7.6 s < 10 s, no lend;
    fixed_ratio has no gate and lends; a surplus of 5 > 4.8 leaves no gap."""
    default = Policy("default", 0.3)
    assert default.gap(ctx(17, 16)) == pytest.approx(3.8)
    assert default.should_activate(ctx(17, 16))
    assert default.benefit(ctx(17, 16, [6.0, 0.0], [3, 0])) == pytest.approx(-2.4)
    assert not default.should_activate(ctx(17, 16, [6.0, 0.0], [3, 0]))
    assert default.per_sample_s == 2.0
    # a cycle served from the backlog keeps the last estimate (not 0)
    assert default.estimate_per_sample(ctx(17, 16, [0.0], [0])) == 2.0
    assert Policy("fixed_ratio", 0.3).should_activate(ctx(17, 16, [6.0], [3]))
    assert not Policy("fixed_ratio", 0.3).should_activate(ctx(21, 16))
    assert not Policy("static_fully_async", 0.3).should_activate(ctx(0, 16))


def test_the_default_ratio_adapts_and_the_switch_cost_is_a_mean_of_three() -> None:
    """Waited 3 of 16: +clip(0.1875, 0.02, 0.1) = +0.1; waited 1: +0.0625; none: -0.02;
    a cap at 1. Switches of 4, 6, 8 and 20 s: the mean of the last three, 34/3."""
    p = Policy("default", 0.3)
    p.update(1, Context(4, 4, wait_samples=[3], activate_s=3.0, deactivate_s=1.0))
    assert p.ratio == pytest.approx(0.4) and p.switch_cost() == 4.0
    p.update(2, Context(4, 4, wait_samples=[1], activate_s=6.0))
    assert p.ratio == pytest.approx(0.4625)
    p.update(3, Context(4, 4, activate_s=8.0))
    assert p.ratio == pytest.approx(0.4425)
    p.update(4, Context(4, 4, activate_s=20.0))
    assert p.switch_cost() == pytest.approx(34 / 3)
    assert Policy("default", 0.3).switch_cost() == 10.0  # no switch measured yet
    high = Policy("default", 0.95)
    high.update(1, Context(4, 4, wait_samples=[16]))
    assert high.ratio == 1.0
    fixed = Policy("fixed_ratio", 0.3)
    fixed.update(1, Context(4, 4, wait_samples=[16], activate_s=5.0))
    assert fixed.ratio == 0.3 and fixed.switches == []


# -- the lend, by hand ------------------------------------------------------------------


def config(**over: Any) -> RunConfig:
    cfg = RunConfig(system="verl-dynamic", workload="sci-jl", groups=8, update_groups=2,
                    rounds=2, seed=3)
    for key, value in over.items():
        table, name = key.split("__")
        setattr(cfg if table == "cfg" else getattr(cfg, table), name, value)
    return cfg.validate()


class LendProbe:
    """Two groups in flight on the one standing replica; at 5 s a lend with rebalance,
    at 8 s an optimizer step asked for, at 10 s a reclaim."""

    name = "verl-dynamic"
    summary = "a probe"
    knobs = ()

    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        self.lent = self.replicas = 0

    async def run(self, rt: Any) -> None:
        await rt.trainer.step()
        self.at["alone"] = rt.now()  # one optimizer step with nothing lent
        served = [rt.spawn(rt.serve(g)) for g in new_groups(rt, 0, rt.workload.take(2))]
        await rt.sleep(5.0)

        async def step() -> None:
            await rt.sleep(3.0)
            self.at["asked"] = rt.now()
            await rt.trainer.step()
            self.at["stepped"] = rt.now()

        stepper = rt.spawn(step())
        self.at["lend"] = rt.now()
        self.lent = await rt.engine.lend(0.5, rebalance=True)
        self.at["lent"], self.replicas = rt.now(), rt.engine.replicas
        await rt.sleep(self.at["lend"] + 5.0 - rt.now())
        self.at["reclaim"] = rt.now()
        await rt.engine.reclaim()
        self.at["back"] = rt.now()
        await stepper
        await rt.gather(*served)


def test_a_lend_and_a_reclaim_take_their_switches_and_hold_the_trainer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cost 1.5 s a hand-over, 0.5 s the weights: a lend asked at L ends at L + 2.0 with
    8 // 2 = 4 replicas beside the one; the reclaim asked at L + 5 ends at L + 6.5; the
    step asked at L + 3 waits for it, so it ends one step's time after L + 6.5. Every
    request still finishes: those moved go on from their tokens."""
    from harness.sim.runtime import SimRuntime

    monkeypatch.setattr(hybrid, "lend_cost", lambda cfg, data: hybrid.LendCost(1.5, 0.5))
    probe, path = LendProbe(), tmp_path / "t.jsonl"
    SimRuntime(config(), path).run(probe)
    at, one_step = probe.at, probe.at["alone"]
    assert (probe.lent, probe.replicas) == (4, 5)
    assert at["lent"] - at["lend"] == pytest.approx(2.0)
    assert at["asked"] - at["lend"] == pytest.approx(3.0)
    assert at["back"] - at["reclaim"] == pytest.approx(1.5)
    assert at["stepped"] - at["back"] == pytest.approx(one_step)
    events = read_trace(path)
    resize = [e for e in events if e["ev"] == "engine_resize"]
    assert [(e["replicas"], e.get("lent")) for e in resize] == [(5, 4), (1, None)]
    assert resize[0]["t"] == pytest.approx(at["lent"])
    assert resize[1]["t"] == pytest.approx(at["reclaim"])
    finished = [e for e in events if e["ev"] == "request_finish" and e["status"] == "finished"]
    assert len(finished) == 2 * 8


def test_a_lend_is_priced_from_the_framework_switch_and_ipc(tmp_path: Path) -> None:
    cfg = config()
    s = cfg.sim
    sync = round(weight_sync.predict_sync_s(s.model, s.trainer_gpu, 8, 8, path="ipc",
                                            colocated=True), 4)
    sw = switch.switch("fsdp", s.model, s.trainer_gpu, 8, s.rollout_tp, 0, switch.lead_s("fsdp"))
    assert hybrid.lend_cost(cfg, {}) == hybrid.LendCost(round(sw.handover_s, 4), sync)
    assert hybrid.lend_cost(config(sim__switch_s=1.5), {}).handover_s == 1.5


# -- the system on the small config ------------------------------------------------------


def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **over: Any) -> list[dict]:
    monkeypatch.setattr(hybrid, "lend_cost", lambda cfg, data: hybrid.LendCost(1.5, 0.5))
    path = tmp_path / "t.jsonl"
    execute(config(**over), path)
    return read_trace(path)


def test_fixed_ratio_lends_after_a_sync_and_reclaims_at_two_queued(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each gate's gap is 0.3 x 8 - (generated - expected), worked from its own fields;
    a lend ends 2.0 s after the sync's weights, a reclaim 1.5 s after it is asked, with
    2 groups queued; the trainer trains only after it."""
    events = run(tmp_path, monkeypatch, verl_dynamic__policy="fixed_ratio", cfg__rounds=3)
    gates = [e for e in events if e.get("what") == "hybrid_gate"]
    assert gates
    for g in gates:
        assert g["gap"] == pytest.approx(2.4 - (g["generated"] - g["expected"]))
        assert g["lend"] == (g["gap"] > 0)
    assert any(g["lend"] for g in gates)
    published = [e["t"] for e in events if e["ev"] == "weights_published"]
    lends = [e for e in events if e["ev"] == "engine_resize" and e.get("lent")]
    reclaims = [e for e in events if e.get("what") == "hybrid_reclaim"]
    for lend in lends:
        assert any(lend["t"] == pytest.approx(t + 2.0) for t in published)
    takes = [e for e in events if e["ev"] == "engine_resize" and not e.get("lent")]
    for took, said in zip(takes, reclaims, strict=False):
        assert said["t"] == pytest.approx(took["t"] + 1.5)
        assert said["queued"] >= said["threshold"] == 2
        assert not [e for e in events if e["ev"] == "train_start"
                    and took["t"] <= e["t"] < said["t"]]


def test_static_policy_is_verl_fully_async(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    """verl's static_fully_async policy never lends: the same run as verl-fully-async,
    event for event, but for the gate's own decisions."""
    events = run(tmp_path, monkeypatch, verl_dynamic__policy="static_fully_async")
    cfg = RunConfig(system="verl-fully-async", workload="sci-jl", groups=8, update_groups=2,
                    rounds=2, seed=3).validate()
    execute(cfg, tmp_path / "plain.jsonl")
    plain = read_trace(tmp_path / "plain.jsonl")

    def body(evs: list[dict]) -> list[dict]:
        return [e for e in evs if e["ev"] != "run_start" and e.get("what") != "hybrid_gate"]

    assert body(events) == body(plain)


@pytest.mark.parametrize(("key", "value", "field"), [
    ("policy", "adaptive", "verl_dynamic.policy"),
    ("deactivate_ratio", 0.0, "verl_dynamic.deactivate_ratio"),
    ("hybrid_memory_fraction", 1.5, "verl_dynamic.hybrid_memory_fraction"),
])
def test_bad_knobs_are_refused_naming_the_field(key: str, value: Any, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        config(**{f"verl_dynamic__{key}": value})


def test_refused_where_the_lent_replica_cannot_hold_the_model() -> None:
    cfg = config()
    cfg.verl_dynamic.hybrid_memory_fraction = 0.05
    with pytest.raises(ConfigError, match="verl_dynamic.hybrid_memory_fraction=0.05"):
        check_run(cfg)
    cfg = config(sim__placement="colocated")
    with pytest.raises(ConfigError, match="is disaggregated only"):
        check_run(cfg)


def test_its_bound_is_verl_fully_async_s() -> None:
    from systems.verl_fully_async import VerlFullyAsync

    for s in (0.0, 0.1, 1.0):
        cfg = config(verl_async__staleness_threshold=s)
        assert VerlDynamic.staleness_bound(cfg) == VerlFullyAsync.staleness_bound(cfg)


def test_a_round_is_not_final_while_a_sync_s_aborts_may_go_on(tmp_path: Path) -> None:
    """A sync's partial rollout aborts requests and sends them again in the same instant.
    A prefix cut between the two (verl-fully-async here, U = 1, R = 3: after event 63)
    called round 0 finished, and the next prefix took it back; found by verl-dynamic's
    property runs, whose extra decision moved the sampled cut onto that instant."""
    from harness.cli.common import build_config
    from harness.core.metrics import finished_rounds

    sets = ["system=verl-fully-async", "workload=sci-jl", "seed=0", "rounds=2",
            "update_groups=1", "groups=3", "group_size=2", "sim.rollout_tp=1",
            "sim.mem_fraction=0.2", "sim.max_running=2", "sim.verifier_workers=0",
            "sim.micro_batch_tokens=1024", "sim.weight_sync_s=0.0"]
    execute(build_config(None, sets), tmp_path / "t.jsonl")
    events = read_trace(tmp_path / "t.jsonl")
    before: set[int] = set()
    for n in range(1, len(events)):
        done = finished_rounds(events[:n])
        assert before <= done, n
        before = done


def test_its_own_trace_passes_the_checks_and_the_lend_s_phase_is_left_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """test_check's small config (R = 8, U = 2, 3 rounds). The lend after the first sync
    takes the model's 0.7 s (a hand-over and the weights on the trainer's GPUs): in that
    phase the one standing replica re-prefills the requests the sync aborted and nothing
    new is submitted (the aborted ones are re-admitted, the same requests), so
    `throughput` leaves it out as it leaves out any phase that only runs what was
    outstanding at its barrier. Until findings-13's item 12 it was judged, at 0.05 of the
    median before: a FAIL, which this test recorded as a short phase's artefact (with a
    2.0 s lend, or without the rebalance, it passed). Every check passes now, in all three."""
    from test_check import small

    from harness.analysis.check import check_events
    from harness.analysis.check.model import TraceView
    from harness.analysis.check.throughput import phase_rates
    from harness.sim import calibration

    def judged(rebalance: bool) -> tuple[set[str], list[dict]]:
        cfg = small("verl-dynamic")
        cfg.verl_dynamic.enable_rebalance = rebalance
        execute(cfg, tmp_path / "t.jsonl")
        events = read_trace(tmp_path / "t.jsonl", strict=True)
        r = {x.name: x for x in check_events(events)}
        assert r["staleness"].bound is VerlDynamic.staleness_bound(cfg) is None
        assert r["throughput"].passed is True
        return {n for n, x in r.items() if x.passed is False}, events

    cfg = small("verl-dynamic")
    cost = hybrid.lend_cost(cfg, calibration.load(cfg.sim.calibration))
    failed, events = judged(True)
    assert failed == set()
    lend = next(e for e in events if e["ev"] == "engine_resize" and e.get("lent"))
    sync = lend["t"] - cost.handover_s - cost.sync_s
    starts = [start for _, start, _, _ in phase_rates(TraceView.of(events))]
    assert not [t for t in starts if abs(t - sync) < 1e-6] and lend["t"] in starts
    assert judged(False)[0] == set()
    monkeypatch.setattr(hybrid, "lend_cost", lambda cfg, data: hybrid.LendCost(1.5, 0.5))
    assert judged(True)[0] == set()


def test_the_live_engine_lends_nothing_and_says_so_once() -> None:
    """One live engine beside one live trainer: no GPU to lend. The run goes on as
    verl-fully-async, the operation recorded once as not applicable."""
    import asyncio

    from harness.live.engine import LiveEngine

    said: list[dict[str, Any]] = []
    engine = LiveEngine(backend=None, prompt_ids=lambda r: [],  # type: ignore[arg-type]
                        emit=lambda ev, **f: said.append({"ev": ev, **f}))

    async def twice() -> list[int]:
        return [await engine.lend(0.5, True), await engine.lend(0.5), await engine.reclaim()]

    assert asyncio.run(twice()) == [0, 0, 0]
    assert [(e["what"], e["operation"]) for e in said] == [("not_applicable", "lend")]


def test_plan_tries_verl_fully_async_s_shares_and_its_policies() -> None:
    from harness.studies.plan.knobs import ASYNC_STALENESS

    knobs = VerlDynamic.plan_knobs(None)
    assert knobs["verl_async.staleness_threshold"] == list(ASYNC_STALENESS["verl-dynamic"][1])
    assert ASYNC_STALENESS["verl-dynamic"] == ASYNC_STALENESS["verl-fully-async"]
    assert knobs["verl_dynamic.policy"] == ["default", "fixed_ratio"]
    assert knobs["verl_dynamic.deactivate_ratio"] == [0.3, 0.6]
