"""RollPacker's readings (issue #25 §5): the schedule's period, the batch scaled with
the GPUs, Table 3's long rounds, the 32k-scaled lengths. Values worked out by hand."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from harness.core.config import RunConfig
from harness.core.trace import read_trace
from harness.run.execute import execute
from harness.studies.reproduce.rollpacker import runs
from workloads.profile import SimWorkload, load_profile


def test_the_period_of_tail_batching_is_worked_out_from_the_deferred_prompts() -> None:
    # eta 1.25: 160 - 128 = 32 deferred a round, 4 short rounds fill the queue
    assert runs.schedule(1.25) == ["short"] * 4 + ["long"]
    # eta 1.5: 64 deferred, 2 short rounds, so a long round every third round
    assert runs.schedule(1.5) == ["short", "short", "long"]
    assert runs.period(1.0) == 1  # nothing deferred: every round alike
    assert runs.common_period() == 15  # lcm(1, 5, 3): whole periods of every eta of Fig. 11
    # eta 1.2: ceil(153.6) - 128 = 26 deferred; the queue is empty again after 26k = 128m,
    # k = 64 short rounds and m = 13 long ones
    assert runs.period(1.2) == 77
    assert runs.eta_config("prompts", 1.5).rounds == 15
    assert runs.eta_config("prompts", 1.0).rounds == 15  # the base of every comparison
    assert runs.eta_config("responses", 1.5).rounds == 5  # period 1: any count is whole


def test_a_simulated_eta_of_1_5_runs_a_long_round_every_third_round(tmp_path: Path) -> None:
    cfg = RunConfig(system="rollpacker", workload="rp-math", groups=8, update_groups=8,
                    group_size=4, rounds=6, max_response_tokens=8192,
                    rollpacker_speculation=1.5, rollpacker_response_speculation=1.0,
                    rollpacker_reward_scheduler=False, rollpacker_planner=False,
                    rollpacker_stream_trainer=False)
    s = cfg.sim
    s.model, s.rollout_gpu, s.trainer_gpu, s.rollout_engines = ("qwen2.5-7b", "h800-sxm",
                                                                "h800-sxm", 2)
    s.placement, s.calibration = "colocated", "rollpacker"
    execute(cfg.validate(), tmp_path / "t.jsonl")
    events = read_trace(tmp_path / "t.jsonl")
    kinds = [e["what"] for e in events if e["ev"] == "decision" and e["what"].endswith("_round")]
    assert kinds == ["short_round", "short_round", "long_round"] * 2  # ceil(12) - 8 = 4
    out = runs.breakdown(events)
    assert out["long_rounds"] == 2 / 6


def _event(ev: str, t: float, **kw: object) -> dict:
    return {"ev": ev, "t": t, **kw}


def test_table3_measures_the_mean_wall_time_of_the_long_rounds() -> None:
    events = [_event("run_start", 0.0)]
    starts, kinds = (0.0, 10.0, 30.0, 36.0), ("short", "long", "short", "long")
    for i, (t, kind) in enumerate(zip(starts, kinds, strict=True)):
        events += [_event("rollout_start", t, round=i),
                   _event("decision", t, what=f"{kind}_round"),
                   _event("rollout_complete", t + 1, round=i)]
    events.append(_event("run_end", 50.0))
    out = runs.breakdown(events)
    assert out["long_step_s"] == (20.0 + 14.0) / 2  # 10 -> 30 and 36 -> the end at 50
    assert out["step_s"] == 50.0 / 4 and out["long_rounds"] == 0.5
    assert runs.table3_config("20%").rounds == 25  # five periods: five long rounds
    assert math.isnan(runs.breakdown(events[:4] + [_event("run_end", 9.0)])["long_step_s"])


def test_scaling_doubles_the_batch_and_the_reward_workers_with_the_gpus() -> None:
    base = runs.config("14B/16k", "rollpacker")
    for gpus, prompts in ((64, 256), (128, 512)):
        cfg = runs.scaled("14B/16k", "verl", gpus)
        assert (cfg.groups, cfg.update_groups) == (prompts, prompts)  # one step a rollout
        assert cfg.sim.rollout_engines * cfg.sim.rollout_tp == gpus
        assert cfg.sim.verifier_workers == base.sim.verifier_workers * gpus // 32
    same = runs.scaled("14B/16k", "rollpacker", 32)
    assert same.to_dict() == base.to_dict()  # 32 GPUs is Table 2's own run


def test_32k_scaled_lengths_double_every_prompt_of_a_component() -> None:
    mix, plain = load_profile("rp-mix-32k"), load_profile("rp-mix")
    assert mix.max_tokens == 32768 and mix.mean_tokens == 2 * plain.mean_tokens
    for scaled, own in zip(mix.components, plain.components, strict=True):
        assert scaled.name == own.name  # the same random streams: the same prompts
        a, b = SimWorkload(scaled, 0, 8), SimWorkload(own, 0, 8)
        for i in range(50):
            x = np.array(a.prompt(i).hidden.lengths)
            y = np.array(b.prompt(i).hidden.lengths)
            assert np.all(np.abs(x - 2 * y) <= 2 + 0.002 * y), (own.name, i)


def test_table2_runs_every_reading_that_applies() -> None:
    rows, items = runs.table2_runs(0)
    readings = {(r["size"], r["system"], r["reading"]) for r in rows}
    # 7B: both anchors; 14B: one; 32B: one anchor, both lengths
    assert len(readings) == len(rows) == 8 + 5 + 10
    assert ("14B/16k", "tail batching", "") in readings  # no reward scheduler: no anchor
    assert ("32B/32k", "veRL", "32k-scaled lengths") in readings
    assert ("32B/32k", "+ stream trainer", "32k-scaled lengths, persistent anchor") in readings
    assert ("7B/8k", "+ stream trainer", "fresh anchor") in readings
    by = {(r["size"], r["system"], r["reading"]): cfg for r, (cfg, _) in zip(rows, items,
                                                                           strict=True)}
    assert by[("32B/32k", "veRL", "32k-scaled lengths")].workload == "rp-mix-32k"
    assert by[("7B/8k", "+ reward scheduler", "fresh anchor")].rollpacker_anchor == "step"


def test_the_reward_workers_are_read_from_the_fit_before_the_priors(tmp_path: Path) -> None:
    # `calibrate rollpacker` fits verifier_workers to veRL's reward share (Table 1); a
    # [fit] value overrides a [fixed] prior, and a file with neither keeps 64
    both = tmp_path / "both.toml"
    both.write_text("[fit]\nverifier_workers = 300\n[fixed]\nverifier_workers = 64\n")
    assert runs.verifier_workers(str(both)) == 300
    (tmp_path / "none.toml").write_text("[fit]\ntrain_mfu = 0.2\n")
    assert runs.verifier_workers(str(tmp_path / "none.toml")) == 64
