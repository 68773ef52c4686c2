"""`rolloutbench check`'s throughput property (harness/analysis/check/throughput.py):
PrimeIntellect-ai/prime-rl#1372's collapse (15k to 500 tok/s after the first async
barrier) is caught on a hand-built trace and its mended twin passes; a batch draining
after a barrier (requests outstanding, none new until they end) is left out, by hand and
on the simulated runs a new user found flagged (sortedrl and areal at R = 16, U = 4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from check_traces import finish_group, head, phases, submit_group
from test_check import results

from harness.analysis.check import check_events
from harness.core.config import RunConfig
from harness.core.trace import read_trace
from harness.run.execute import execute


# -- prime-rl#1372: after the barrier, one group out, one group in --------------------
def test_prime_rl_collapse_after_barrier(tmp_path: Path) -> None:
    r = results(phases([32, 1, 1, 1, 1]), tmp_path)["throughput"]
    # 32 x 16 x 100 tokens / 10 s = 5120 tok/s, then 1 group: 160 tok/s = 1/32
    assert r.passed is False and r.value == pytest.approx(1 / 32, abs=1e-4)
    assert r.first["t"] == 10.0 and r.first["ev"] == "weights_published"
    assert r.first["rate"] == 160.0 and r.first["median_before"] == 5120.0


def test_prime_rl_refill_keeps_throughput(tmp_path: Path) -> None:
    r = results(phases([32, 32, 32, 32, 32]), tmp_path)["throughput"]
    assert r.passed is True and r.value == pytest.approx(1.0)


# -- a batch draining after a barrier is no collapse ------------------------------------
def drained(resumed: bool) -> list[dict]:
    """Four 10 s phases of groups of 16, 100 tokens a request an attempt: 32 groups, then
    one, then 32 and 32. The one group of phase 1 is either new (prime-rl#1372's refill,
    as `phases([32, 1, 32, 32])`) or group 31, aborted at the barrier with its 100 tokens
    and resumed with them (SortedRL's early update, AReaL's interrupted generation)."""
    k, events = 16, [head("sortedrl", groups=1, group_size=16),
                     {"t": 0.0, "ev": "rollout_start", "round": 0, "version": 0}]
    for g in range(32):
        submit_group(events, 0.0, 0, g, k)
    for g in range(31):
        finish_group(events, 10.0, g, k, 0, 100)
    if resumed:
        events += [{"t": 10.0, "ev": "request_finish", "group": 31, "sample": s,
                    "response_tokens": 100, "status": "aborted", "versions": [0, 0],
                    "version_spans": [[0, 100]]} for s in range(k)]
    else:
        finish_group(events, 10.0, 31, k, 0, 100)
    events.append({"t": 10.0, "ev": "weights_published", "version": 1})
    if resumed:
        events += [{"t": 10.0, "ev": "request_submit", "round": 0, "group": 31, "sample": s,
                    "prompt_tokens": 10, "resumed_tokens": 100} for s in range(k)]
        events += [{"t": 20.0, "ev": "request_finish", "group": 31, "sample": s,
                    "response_tokens": 200, "status": "finished", "versions": [0, 1],
                    "version_spans": [[0, 100], [1, 200]]} for s in range(k)]
        events += [{"t": 20.0, "ev": "group_complete", "group": 31},
                   {"t": 20.0, "ev": "group_materialized", "group": 31}]
    else:
        submit_group(events, 10.0, 0, 32, k)
        finish_group(events, 20.0, 32, k, 1, 100)
    for n, t in enumerate((20.0, 30.0)):
        events.append({"t": t, "ev": "weights_published", "version": 2 + n})
        for g in range(33 + 32 * n, 65 + 32 * n):
            submit_group(events, t, 0, g, k)
        for g in range(33 + 32 * n, 65 + 32 * n):
            finish_group(events, t + 10.0, g, k, 2 + n, 100)
    events.append({"t": 40.0, "ev": "run_end"})
    return events


def test_a_new_group_a_phase_is_a_collapse(tmp_path: Path) -> None:
    """Phase 1 runs 16 new requests: 16 x 100 / 10 s = 160 tok/s against 5120, 1/32."""
    r = results(drained(resumed=False), tmp_path)["throughput"]
    assert r.passed is False and r.value == pytest.approx(1 / 32, abs=1e-4)
    assert r.first["t"] == 10.0 and r.first["rate"] == 160.0


def test_the_last_group_draining_is_no_collapse(tmp_path: Path) -> None:
    """The same 160 tok/s, but group 31 was outstanding at the barrier and no request is
    new until it ends (the next is at 20 s, after its last finish): phase 1 drains and
    is left out. Phase 2 (20-30 s) is judged, 5120 against 5120; phase 3 ends after the
    last submission (30 s), left out as before."""
    r = results(drained(resumed=True), tmp_path)["throughput"]
    assert r.passed is True and r.value == 1.0
    assert r.detail.startswith("2 phases between barriers")


def test_untimed_import_is_not_judged_on_throughput(tmp_path: Path) -> None:
    events = phases([32, 1, 1])
    events[0]["import"] = {"timed": False}
    r = results(events, tmp_path)["throughput"]
    assert r.passed is None and r.status == "not checked"



@pytest.mark.parametrize(("system", "value"), [("sortedrl", 0.9109), ("areal", 0.5664)])
def test_draining_at_r16_u4_is_no_collapse(system: str, value: float, tmp_path: Path) -> None:
    """dapo-math-17k, R = 16, K = 8, U = 4, 2 rounds (a new user's run): `throughput` gave
    sortedrl 0.18 (its round's groups left after the first early update, resumed: no new
    request until the next round) and areal 0.19 (its last 6 requests, interrupted at the
    last weight update and resumed), each a batch draining. Every property passes now."""
    cfg = RunConfig(system=system, workload="dapo-math-17k", groups=16, group_size=8,
                    update_groups=4, rounds=2)
    execute(cfg.validate(), tmp_path / "t.jsonl")
    r = {x.name: x for x in check_events(read_trace(tmp_path / "t.jsonl", strict=True))}
    assert not [name for name, x in r.items() if x.passed is False]
    assert r["throughput"].value == value


# -- one rollout draining while another has not pulled (Laminar's replicas) -------------
def two_rollouts(pull: float, refill: int) -> list[dict]:
    """Every request makes 10 tok/s, so a group of 16 running is 160 tok/s. Barriers at
    0 (rollout_start), 10, 20 and 30 (weights_published). Rollout A's batch (groups 0-14
    and 30) and B's (15-29 and 31) start at 0; all but one group of each end at 10, A's
    tail (group 30) at `pull`, B's (31) at 25. Each pulls when its batch is done: A
    `refill` groups at `pull` (ending at 31), B 32 at 25 (ending at 35), A 32 more at 31
    (ending at 41: the last submission, so the phase 20-30 is judged)."""
    k, events = 16, [head("laminar", groups=32, group_size=16),
                     {"t": 0.0, "ev": "rollout_start", "round": 0, "version": 0}]
    for g in range(32):
        submit_group(events, 0.0, 0, g, k)
    for g in range(30):
        finish_group(events, 10.0, g, k, 0, 100)
    timed = [(10.0, {"ev": "weights_published", "version": 1}),
             (20.0, {"ev": "weights_published", "version": 2}),
             (30.0, {"ev": "weights_published", "version": 3}),
             (pull, 30, 0.0), (25.0, 31, 0.0), (pull, range(32, 32 + refill), pull),
             (25.0, range(64, 96), 25.0), (31.0, range(32, 32 + refill), pull),
             (31.0, range(96, 128), 31.0), (35.0, range(64, 96), 25.0),
             (41.0, range(96, 128), 31.0)]
    ends = {31.0, 35.0, 41.0}
    for item in sorted(timed, key=lambda x: x[0]):
        t = item[0]
        if isinstance(item[1], dict):
            events.append({"t": t, **item[1]})
        elif isinstance(item[1], int):
            finish_group(events, t, item[1], k, 0, round(10 * (t - item[2])))
        elif t in ends and item[2] < t:
            for g in item[1]:
                finish_group(events, t, g, k, 1, round(10 * (t - item[2])))
        else:
            for g in item[1]:
                submit_group(events, t, 0, g, k)
    events.append({"t": 41.0, "ev": "run_end"})
    return events


@pytest.mark.parametrize(("pull", "refill", "passed", "value", "phases"), [
    (19.0, 32, True, 1.0312, 3), (21.0, 32, True, 1.5694, 2), (19.0, 1, False, 0.0625, 3)])
def test_one_rollout_draining_beside_another_is_no_collapse(
        pull: float, refill: int, passed: bool, value: float, phases: int,
        tmp_path: Path) -> None:
    """The phase 0-10 runs 32 groups: 5120 tok/s. Before, the phase 10-20 was judged
    whole: with A pulling at 19, groups 30 (9 s) and 31 (10 s) and A's 32 new ones (1 s)
    made 160 x 51 / 10 = 816 tok/s, 0.16 of 5120: a FAIL where both rollouts only ran
    their tails (laminar's 200-round run: 0.108). Now it is judged from A's pull on:
    group 31 and A's 32 groups, 160 x 33 = 5280, 1.0312; then 20-30 from B's pull at 25:
    A's and B's 64 groups, 10240 over the median 5200, 1.97. Pulling at 21, nothing is
    submitted in 10-20: left out; 20-30 is judged from 21 (group 31 for 4 s, A's groups
    9 s, B's 5 s): 160 x 452 / 9 = 8035.6 over 5120, 1.5694. A refill of one group at 19
    still fails: group 31 and group 32, 320 tok/s, 1/16."""
    r = results(two_rollouts(pull, refill), tmp_path)["throughput"]
    assert r.passed is passed and r.value == value
    assert r.detail.startswith(f"{phases} phases between barriers")
    if not passed:
        assert r.first["t"] == 10.0 and r.first["rate"] == 320.0
        assert r.first["median_before"] == 5120.0


def test_laminars_long_run_on_two_replicas_passes(tmp_path: Path) -> None:
    """A new user's run (findings-13, item 12): R = 16, U = 2, 200 rounds, two replicas.
    `throughput` failed it at 0.108: at 7020.9 s both rollouts were in their batches'
    tails, the phase to the next publication held 4 finishes and no submission. Now it
    is left out, and a phase is judged from its first submission where requests were
    outstanding at its barrier: the lowest is 0.6803."""
    cfg = RunConfig(system="laminar", groups=16, update_groups=2, rounds=200)
    cfg.sim.rollout_engines = 2
    execute(cfg.validate(), tmp_path / "t.jsonl")
    r = {x.name: x for x in check_events(read_trace(tmp_path / "t.jsonl", strict=True))}
    assert r["throughput"].passed is True and r["throughput"].value == 0.6803
