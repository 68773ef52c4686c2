"""`rolloutbench check`: each property catches the bug it is built for, on a small
hand-built trace (tests/check_traces.py), and passes the mended twin; every system's
own simulated trace passes at its own bound; the report and the exit codes.

The bugs: areal-project/AReaL#1388 (staleness past max_head_offpolicyness after a
resume; fixed by AReaL PR #1345), NVIDIA/Megatron-LM#5853 (G-submission slots freed
at assembly: backlog and staleness past --rl-generation-lag), PrimeIntellect-ai/
prime-rl#1372 (15k to 500 tok/s after the first async barrier), and the bias that
thinking-machines-lab/tinker-cookbook PR #822 avoids (dropping stale groups trains on
the fast problems).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from check_traces import finish_group, pipeline, submit_group, write
from typer.testing import CliRunner

from harness.analysis.check import Limits, check_events
from harness.cli.app import app
from harness.core.config import RunConfig
from harness.core.trace import read_trace
from harness.run.execute import execute
from systems import SYSTEMS, system_names


def results(events: list[dict], tmp_path: Path, **limits: int) -> dict:
    """Each property's result by name, the trace read back through the strict reader
    (so the hand-built trace is a valid one)."""
    events = read_trace(write(tmp_path / "t.jsonl", events), strict=True)
    return {r.name: r for r in check_events(events, Limits(**limits))}


# -- AReaL#1388: after a resume at version 100, `accepted` restarts at 0 -------------
# capacity = min(concurrency, (max_staleness + version + 1) x batch - accepted);
# max_staleness 2, batch 1 group of 2, concurrency 8. PR #1345 sets accepted to
# version x batch on recovery.
def areal(fixed: bool) -> list[dict]:
    return pipeline(lambda s: min(8, (2 + s["version"] + 1) - (s["assembled"]
                                                               + (100 if fixed else 0))),
                    steps=8, per_step=1, k=2, v0=100)


def test_areal_resume_bug_breaks_the_staleness_bound(tmp_path: Path) -> None:
    r = results(areal(fixed=False), tmp_path, bound=2)
    # 8 groups start on v100 at once; step s trains group s on v100+s: lag s
    assert r["staleness"].passed is False and r["staleness"].value == 7
    assert r["staleness"].first == {"t": 3.5, "ev": "batch_dispatch", "group": 3, "batch": 3}
    # and the backlog runs away: step s leaves 8(s+1) - s groups of 2 before training
    assert r["backlog"].passed is False and r["backlog"].bound == (2 + 1) * 1 * 2
    assert r["backlog"].value == 2 * (8 * 8 - 7)


def test_areal_resume_fixed_holds_the_bound_exactly(tmp_path: Path) -> None:
    r = results(areal(fixed=True), tmp_path, bound=2)
    # 3 groups on v100, then one per step on v(100+s): group s+2 trained 2 steps on
    assert r["staleness"].passed is True and r["staleness"].value == 2
    assert r["backlog"].passed is True and r["backlog"].value == 6  # 3 groups of 2
    assert r["starvation"].passed is True


# -- Megatron-LM#5853: the gate frees a slot at assembly, not at consumption ----------
# --rl-generation-lag 1, 2 prompts a step: the run-ahead cap is (1 + 1) x 2 = 4 groups.
def megatron(fixed: bool) -> list[dict]:
    held = "consumed" if fixed else "assembled"
    return pipeline(lambda s: 4 - (s["started"] - s[held]), steps=6, per_step=2, k=2,
                    system="megatron")


def test_megatron_gate_bug_breaks_backlog_and_staleness(tmp_path: Path) -> None:
    r = results(megatron(fixed=False), tmp_path, bound=1)
    # 4 groups a step on v_s, 2 trained: step s trains groups 2s, 2s+1 made on v(s//2)
    assert r["staleness"].value == 5 - 5 // 2 and r["staleness"].passed is False
    assert r["staleness"].first["batch"] == 3
    assert r["backlog"].bound == 8 and r["backlog"].passed is False
    assert r["backlog"].value == 4 * 5 + 8  # 2s + 4 groups of 2 ready at step 5
    assert r["backlog"].first["group"] == 6  # step 1: the 9th sample, group 6's first


def test_megatron_gate_fixed_passes(tmp_path: Path) -> None:
    r = results(megatron(fixed=True), tmp_path, bound=1)
    assert (r["staleness"].value, r["staleness"].passed) == (1, True)
    assert (r["backlog"].value, r["backlog"].passed) == (8, True)


# -- length bias (tinker-cookbook PR #822): dropping stale groups drops the long ones ---
def dropping(long_dropped: bool) -> list[dict]:
    """30 groups of 2; 10 dropped as stale. Lengths: trained 100..119; dropped
    300..309 (the long ones went stale) or 105..114 (a choice blind to length)."""
    events = pipeline(lambda s: 0, steps=0, per_step=1)[:-1]  # header and rollout_start
    for gid in range(30):
        submit_group(events, 0.0, 0, gid, 2)
    for gid in range(30):
        n = 100 + gid if gid < 20 else (280 + gid if long_dropped else 85 + gid)
        finish_group(events, 1.0, gid, 2, 0, n)
    events += [{"t": 1.0, "ev": "decision", "what": "drop_group", "group": g,
                "reason": "stale"} for g in range(20, 30)]
    events += [{"t": 1.0, "ev": "batch_dispatch", "batch": 0, "groups": list(range(20))},
               {"t": 1.0, "ev": "train_start", "batch": 0},
               {"t": 2.0, "ev": "train_end", "batch": 0},
               {"t": 2.0, "ev": "optimizer_step", "step": 1, "version": 1},
               {"t": 2.0, "ev": "run_end"}]
    return events


def test_dropping_the_long_groups_biases_lengths(tmp_path: Path) -> None:
    r = results(dropping(long_dropped=True), tmp_path)["length bias"]
    # mean trained 109.5; mean sampled (20 x 109.5 + 10 x 304.5) / 30 = 174.5
    assert r.passed is False and r.value == pytest.approx(109.5 / 174.5, abs=1e-4)
    assert r.first["group"] == 20 and r.first["ev"] == "decision"


def test_dropping_blind_to_length_is_not_bias(tmp_path: Path) -> None:
    r = results(dropping(long_dropped=False), tmp_path)
    assert r["length bias"].passed is True
    assert r["starvation"].passed is True  # every drop says why


# -- starvation -----------------------------------------------------------------------
def with_forgotten_group(drop: dict | None) -> list[dict]:
    """AReaL's mended run, plus group 999: complete at t = 0 and never trained."""
    events = areal(fixed=True)
    submit_group(part := [], 0.0, 0, 999, 2)
    finish_group(part, 0.0, 999, 2, 100, 10)
    events[2:2] = part
    if drop is not None:
        events.insert(-1, {"t": 8.0, "ev": "decision", "what": "drop_group", "group": 999,
                           **drop})
    return events


def test_a_group_left_untrained_past_the_bound_is_starved(tmp_path: Path) -> None:
    r = results(with_forgotten_group(None), tmp_path, bound=2)["starvation"]
    assert r.passed is False and r.value == 1 and r.first["group"] == 999  # waited 8 > 2


def test_a_drop_needs_a_reason(tmp_path: Path) -> None:
    r = results(with_forgotten_group({}), tmp_path, bound=2)["starvation"]
    assert r.passed is False and r.first == {"t": 8.0, "ev": "decision", "group": 999,
                                             "batch": None}
    r = results(with_forgotten_group({"reason": "stale"}), tmp_path, bound=2)["starvation"]
    assert r.passed is True


def test_no_bound_stated(tmp_path: Path) -> None:
    """An import states no staleness bound: measured, reported, not failed."""
    r = results(areal(fixed=False), tmp_path)
    assert r["staleness"].passed is None and r["staleness"].status == "no bound stated"
    assert r["staleness"].value == 7 and r["backlog"].status == "no bound stated"


# -- every system's own trace passes at its own bound ---------------------------------
def small(system: str, **knobs: object) -> RunConfig:
    cfg = RunConfig(system=system, workload="sci-jl", groups=8, update_groups=2, rounds=3,
                    seed=3, over_sampling_groups=12, concurrency=32)
    if system in ("april", "rollpacker", "verl"):
        cfg.update_groups = 8
    for name, value in knobs.items():
        setattr(cfg, name, value)
    return cfg.validate()


# verl-dynamic's own trace is judged in tests/test_verl_dynamic.py: its lend's short phase
# after a sync (every request prefilled twice, by the sync and the rebalance) trips
# `throughput`, a finding about verl's rule, worked there
OWN = [(s, {}) for s in system_names() if s != "verl-dynamic"] + [("pipelinerl", {"max_lag": 1}),
                                           ("pipelinerl", {"max_lag": 0}),
                                           ("april", {"dynamic_sampling": True}),
                                           ("sortedrl", {"max_lag": 0})]


@pytest.mark.parametrize(("system", "knobs"), OWN, ids=lambda v: str(v) if v else "")
def test_own_trace_passes(system: str, knobs: dict, tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    cfg = small(system, **knobs)
    execute(cfg, path)
    r = {x.name: x for x in check_events(read_trace(path, strict=True))}
    failed = {name: (x.value, x.bound, x.detail) for name, x in r.items() if x.passed is False}
    assert not failed
    rule = getattr(SYSTEMS[system], "staleness_bound", None)
    bound = SYSTEMS[system]().staleness_bound(cfg) if rule else None
    assert r["staleness"].bound == bound
    assert r["staleness"].passed is (None if bound is None else True)


@pytest.mark.parametrize("system", ["slime", "cgp", "verl", "rollpacker"])
def test_synchronous_bound_is_reached(system: str, tmp_path: Path) -> None:
    """R/U - 1 steps (0 for one step a round) is what the trace shows: the bound is the
    lag of the round's last batch, not a loose ceiling."""
    execute(small(system), tmp_path / "t.jsonl")
    r = check_events(read_trace(tmp_path / "t.jsonl"))[0]
    assert r.value == r.bound == (0 if system in ("verl", "rollpacker") else 8 // 2 - 1)


def test_april_without_partial_rollout_is_biased_short(tmp_path: Path) -> None:
    """Over-sampling without partial rollout discards the groups still generating when
    R are complete: the slow ones. The trace shows it: trained responses shorter than
    sampled by more than a tenth, beyond chance."""
    execute(small("april", partial_rollout=False), tmp_path / "t.jsonl")
    r = {x.name: x for x in check_events(read_trace(tmp_path / "t.jsonl"))}
    assert r["length bias"].passed is False and r["length bias"].value < 0.9
    assert r["starvation"].passed is True  # each discard says why


# -- the command: lines, exit codes, the JSON report ----------------------------------
def test_cli_exit_codes_and_report(tmp_path: Path) -> None:
    runner = CliRunner()
    bad = write(tmp_path / "bad.jsonl", areal(fixed=False))
    good = write(tmp_path / "good.jsonl", areal(fixed=True))
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["check", str(bad), "--bound", "2", "--json", str(out)])
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert [ln.split()[0] for ln in lines[:-1]] == ["staleness", "backlog", "starvation",
                                                    "length", "throughput"]
    assert all(len(ln) <= 100 for ln in lines) and "FAIL" in lines[0]
    judged = sum(" pass " in f" {ln} " or " FAIL " in f" {ln} " for ln in lines[:-1])
    failed = sum(" FAIL " in f" {ln} " for ln in lines[:-1])
    assert lines[-1].startswith(f"{judged} of 5 properties judged, {failed} failed")
    doc = json.loads(out.read_text())
    assert doc["passed"] is False and doc["system"] == "areal" and doc["runtime"] == "import"
    first = doc["properties"][0]
    assert set(first) == {"name", "passed", "value", "unit", "bound", "source", "detail",
                          "first", "status"}
    assert (first["value"], first["bound"], first["source"]) == (7, 2, "--bound")
    assert first["first"] == {"t": 3.5, "ev": "batch_dispatch", "group": 3, "batch": 3}
    assert runner.invoke(app, ["check", str(good), "--bound", "2"]).exit_code == 0
    assert runner.invoke(app, ["check", str(bad)]).exit_code == 0  # no bound stated


@pytest.mark.parametrize("what", ["missing", "directory", "not a trace"])
def test_cli_bad_input_is_one_line_exit_2(what: str, tmp_path: Path) -> None:
    path = {"missing": tmp_path / "nope.jsonl", "directory": tmp_path,
            "not a trace": write(tmp_path / "x.jsonl", [{"a": 1}])}[what]
    res = CliRunner().invoke(app, ["check", str(path)])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    assert res.output.startswith("error: ")


def test_the_closing_line_says_how_much_was_judged_and_a_missing_run_end(tmp_path: Path) -> None:
    """A trace cut before its run_end passes what it can, and says it was cut; a
    property not judged (not checked, or no bound stated) is not counted as judged."""
    events = areal(fixed=True)
    whole = CliRunner().invoke(app, ["check", str(write(tmp_path / "a.jsonl", events)),
                                     "--bound", "2"])
    assert "run_end" not in whole.stdout.splitlines()[-1]
    cut = [e for e in events if e.get("ev") != "run_end"]
    res = CliRunner().invoke(app, ["check", str(write(tmp_path / "b.jsonl", cut)),
                                   "--bound", "2"])
    assert res.stdout.splitlines()[-1].endswith("the trace has no run_end (a run cut short?)")
    last = res.stdout.splitlines()[-1]
    judged = int(last.split()[0])
    assert judged == sum(" pass " in f" {ln} " or " FAIL " in f" {ln} "
                         for ln in res.stdout.splitlines()[:-1])


def nothing_to_judge() -> list[dict]:
    """An untimed import with no training and no drops: no property can be judged."""
    events = pipeline(lambda s: 0, steps=0, per_step=1)[:-1]
    events[0]["import"] = {"timed": False, "format": "slime"}
    submit_group(events, 0.0, 0, 0, 2)
    finish_group(events, 1.0, 0, 2, 0, 10)
    return [*events, {"t": 1.0, "ev": "run_end"}]


def test_a_check_that_judged_nothing_is_not_a_pass(tmp_path: Path) -> None:
    """Every property not checked: the closing line says nothing was judged, the report's
    verdict is null and the exit code is 3, its own (it was `"passed": true`, exit 0)."""
    out = tmp_path / "r.json"
    res = CliRunner().invoke(app, ["check", str(write(tmp_path / "t.jsonl", nothing_to_judge())),
                                   "--json", str(out)])
    lines = res.stdout.splitlines()
    assert all(" not checked " in ln for ln in lines[:-1]), res.stdout
    assert lines[-1] == "0 of 5 properties judged, 0 failed: nothing judged, which is not a pass"
    assert res.exit_code == 3
    assert json.loads(out.read_text())["passed"] is None
    assert "3 when none" in " ".join(CliRunner().invoke(app, ["check", "--help"]).stdout.split())


# -- AReaL#1388 on a trace of `--system areal`: its gate's backlog bound catches it ----
def areal_run(fixed: bool) -> list[dict]:
    """The resume bug's trace as the harness would record an areal run at ofp 2, U = 1
    group of K = 2: the bound is the system's own, (2 + 1) x 1 x 2 = 6 samples."""
    events = areal(fixed)
    events[0] = {**events[0], "runtime": "sim", "config": {
        "system": "areal", "groups": 1, "update_groups": 1, "group_size": 2,
        "areal": {"max_head_offpolicyness": 2, "max_concurrent_rollouts": 8}}}
    return events


def test_areal_resume_bug_breaks_its_own_backlog_bound(tmp_path: Path) -> None:
    """No --bound: AReaL promises no staleness bound, but its gate bounds the backlog,
    and the burst after the resume overshoots it (before, the backlog had no bound for
    areal and the check passed this trace)."""
    r = results(areal_run(fixed=False), tmp_path)
    assert r["staleness"].status == "no bound stated" and r["staleness"].value == 7
    b = r["backlog"]
    assert (b.passed, b.bound, b.source) == (False, 6, "areal.backlog_bound")
    assert b.value == 2 * (8 * 8 - 7)
    assert b.first == {"t": 0.5, "ev": "request_finish", "group": 3, "batch": None}


def test_areal_resume_fixed_reaches_its_backlog_bound_exactly(tmp_path: Path) -> None:
    r = results(areal_run(fixed=True), tmp_path)
    assert (r["backlog"].passed, r["backlog"].value, r["backlog"].bound) == (True, 6, 6)


@pytest.mark.parametrize(("system", "knob", "want"), [
    ("areal", {"areal.max_head_offpolicyness": 1}, (1 + 1) * 2 * 8),
    ("skyrl-async", {"skyrl.max_staleness_steps": 3}, (3 + 1) * 2 * 8),
    ("tinker", {"tinker.max_steps_off_policy": 4, "tinker.pipeline_depth": 2}, (2 + 1) * 2 * 8),
])
def test_gate_systems_state_their_backlog_bound(system: str, knob: dict, want: int,
                                                tmp_path: Path) -> None:
    """(staleness knob + 1) x U x K, U = 2, K = 8: each system's own trace is held to it
    and stays within it (before: none for areal and skyrl-async, tinker's (4+1)GK)."""
    cfg = small(system)
    for name, value in knob.items():
        table, field = name.split(".")
        setattr(getattr(cfg, table), field, value)
    execute(cfg.validate(), tmp_path / "t.jsonl")
    r = {x.name: x for x in check_events(read_trace(tmp_path / "t.jsonl", strict=True))}
    assert (r["backlog"].bound, r["backlog"].source) == (want, f"{system}.backlog_bound")
    assert r["backlog"].passed is True and 0 < r["backlog"].value <= want


@pytest.mark.parametrize("resumed", [False, True])
def test_a_simulated_areal_run_with_the_resume_bug_fails_its_backlog(
        resumed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """AReaL#1388 in the system itself: at version 4 its gate's `accepted` restarts at 0
    (a resume without PR #1345), on a trainer slow enough (1 GPU) for admission to run
    ahead. The gate then admits 4 x U more groups than (ofp + 1) x U = 6, and the trace
    overshoots 6 x K = 48 samples; the same run without the reset stays within it."""
    import systems.areal
    from systems.staleness_gate import CapacityGate

    class Resumed(CapacityGate):
        def capacity(self, version: int) -> int:
            if resumed and version >= 4 and not getattr(self, "reset", False):
                self.accepted, self.reset = 0, True
            return super().capacity(version)

    monkeypatch.setattr(systems.areal, "CapacityGate", Resumed)
    cfg = small("areal")
    cfg.sim.trainer_gpus = 1
    execute(cfg.validate(), tmp_path / "t.jsonl")
    b = check_events(read_trace(tmp_path / "t.jsonl", strict=True))[1]
    assert (b.name, b.bound) == ("backlog", (2 + 1) * 2 * 8)
    assert b.passed is (not resumed) and (b.value > 48) is resumed
