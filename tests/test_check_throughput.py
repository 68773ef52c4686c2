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
