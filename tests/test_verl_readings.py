"""verl's READMEs read again (issue 35, item 6): each reading as a test of the setup or of
the claims, with the value worked out by hand from the cited line."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.studies.reproduce.verl_async import claims, runs
from harness.studies.reproduce.verl_async.claims import first_100_claims
from harness.studies.reproduce.verl_async.summary import replica_times

SWAPPED = f"lengths from gen, {runs.SWAPPED}"


def _by_label() -> dict[str, runs.Run]:
    return {r.label: r for r in runs.runs(0)}


def test_the_megatron_colocated_baseline_runs_sixteen_responses_a_prompt() -> None:
    """dapo_7b_math_megatron_colocate.sh:26: n_resp_per_prompt=16 (its 4:12 run and both
    FSDP2 scripts: 12)."""
    by = _by_label()
    assert by["osp colocate 16 Megatron"].cfg.group_size == 16
    assert by["one-step-off 4:12 Megatron"].cfg.group_size == 12
    assert by["osp colocate 16 FSDP2"].cfg.group_size == 12


def test_both_scripts_of_the_smaller_runs_run_staleness_one_tenth() -> None:
    """16_16.sh:74 and 32_32.sh:74: staleness_threshold=0.1 (64_64.sh:74: 0.5)."""
    by = _by_label()
    for label in ("fully async 16:16 s=0.1", "fully async 32:32 s=0.1"):
        assert by[label].cfg.verl_async.staleness_threshold == 0.1
    assert by["fully async 64:64"].cfg.verl_async.staleness_threshold == 0.5


def test_the_thirty_b_run_syncs_in_its_published_time_and_its_colocated_run_does_not() -> None:
    """README.md:459: Qwen3-30B-A3B, 16 x 16 ranks, no checkpoint-engine: 15.76 s."""
    by = _by_label()
    assert by["30B fully async 96:32"].cfg.sim.weight_sync_s == 15.76
    assert by["30B colocate 128"].cfg.sim.weight_sync_s == runs.colocated_sync_s(runs.MOE, 128)


def test_a_colocated_run_charges_the_switch_models_hand_over() -> None:
    """One-step-off FSDP2 on 16 H20s, the fit's lead L taken out of the published 74 s:
    (max(0, 74 - L - 0.3733) + 0.3733 + 0.2987) / 2 a hand-over (engine bytes 2.5P, trainer
    bytes 2P at 51 GB/s, tests/test_switch.py); Megatron the same with 45 s, 3P and 5.5P."""
    from harness.sim import calibration

    leads = calibration.load(runs.PAPER).get("switch", {})
    p = 7.616e9 / 51e9
    by = _by_label()
    for label, pub, engine, trainer, fw in (("FSDP2", 74, 2.5, 2, "fsdp"),
                                            ("Megatron", 45, 3, 5.5, "megatron")):
        fixed = max(0.0, pub - leads.get(fw, 0.0) - engine * p)
        want = (fixed + (engine + trainer) * p) / 2
        assert by[f"osp colocate 16 {label}"].cfg.sim.switch_s == pytest.approx(want, abs=1e-4)
    assert by["fully async 16:16"].cfg.sim.switch_s is None  # its own GPUs: no switch


def _table(reading: str = "lengths from gen", **steps: float) -> pd.DataFrame:
    labels = [r.label for r in runs.runs(0)]
    return pd.DataFrame([{"reading": reading, "label": label,
                          "step_s": steps.get(label, 100.0), "gen_s": 10.0, "wait_s": 10.0,
                          "train_s": 90.0} for label in labels])


def _claims(reading: str = "lengths from gen") -> dict[tuple[str, str, str], claims.Claim]:
    return {(c.claim, c.config, c.reading): c for c in claims.claims(_table(reading))}


def test_the_cells_are_read_in_both_orders() -> None:
    """As first published (6f0b21c README.md:333-334) colocate 32 trains 107.71 + 313.81 =
    421.52 s and 16:16 updates in 269.80; swapped by #4307 (1dda039 :356-357) 377.51 and
    313.81."""
    for reading, colo, full in (("lengths from gen", 421.52, 269.80), (SWAPPED, 377.51, 313.81)):
        got = _claims(reading)
        train = got[("colocate old_log_prob + update_actor (s)", "colocate sync 32 H20",
                     reading)]
        update = got[("fully async update_actor (s)", "fully async 16:16 (README.md:357)",
                      reading)]
        assert train.paper_low == pytest.approx(colo) and update.paper_low == full


def test_the_original_order_makes_every_step_its_parts_plus_a_few_seconds() -> None:
    """Step less gen, old_log_prob and update_actor: 790.10 - 357.41 - 107.71 - 313.81 =
    11.17 s (colocate 32) and 294.77 - 21.26 - 269.80 = 3.71 s (16:16); swapped 55.18 and
    -40.30."""
    colo, full = claims.colocate("")[32], claims.async_rows("")["fully async 16:16"]
    assert colo["step"] - colo["gen"] - colo["old_log_prob"] - colo["update_actor"] == (
        pytest.approx(11.17))
    assert full[0][0] - full[1] - full[2] == pytest.approx(3.71)
    colo, full = claims.colocate(SWAPPED)[32], claims.async_rows(SWAPPED)["fully async 16:16"]
    assert colo["step"] - colo["gen"] - colo["old_log_prob"] - colo["update_actor"] == (
        pytest.approx(55.18))
    assert full[0][0] - full[1] - full[2] == pytest.approx(-40.30)


def test_one_run_is_read_at_its_three_hundred_and_its_four_hundred_step_means() -> None:
    """124.64 (README.md:408, a 300-step table) and 150.63 (:361) are the 64:64 run's two
    windows, each a claim of its own against the same simulated run, not one range."""
    got = _claims()
    four = got[("fully async step (s)", "fully async 64:64 (README.md:361)", "lengths from gen")]
    three = got[("fully async step (s)", "64:64 require_batches=4 (README.md:408)",
                 "lengths from gen, 300 steps")]
    assert (four.paper_low, four.paper_high) == (150.63, 150.63)
    assert (three.paper_low, three.paper_high) == (124.64, 124.64)
    assert three.harness == four.harness


def test_the_first_hundred_steps_are_read_beside_the_four_hundred() -> None:
    """Total time at 100 steps / 100: colocate 32 13h44m = 494.4 s, 16:16 7h58m = 286.8 s;
    the README's 100-step speedup of 16:16 is 1.72x (:357), of 30B 2.01x (:448)."""
    by = _table(**{"colocate 32": 500.0, "fully async 16:16": 250.0}).set_index("label")
    got = {(c.claim, c.config, c.reading): c for c in first_100_claims(by, "lengths from gen")}
    reading = "lengths from gen, first 100 steps"
    colo = got[("step, first 100 steps (s; total time / 100)", "colocate 32", reading)]
    assert colo.paper_low == pytest.approx(494.4) and colo.kind == "input (not fitted)"
    full = got[("step, first 100 steps (s; total time / 100)", "fully async 16:16", reading)]
    assert full.paper_low == pytest.approx(286.8) and full.kind == "prediction"
    speed = got[("speedup over colocate sync (x, first 100 steps)", "fully async 16:16",
                 reading)]
    assert speed.paper_low == 1.72 and speed.harness == pytest.approx(2.0)
    assert got[("30B speedup over colocate sync (x, first 100 steps)", "Qwen3-30B-A3B 96:32",
                reading)].paper_low == 2.01
    script = f"lengths from gen, staleness 0.1 (32_32.sh:74), {claims.FIRST}"
    assert got[("speedup over colocate sync (x, first 100 steps)", "fully async 32:32",
                script)].paper_low == 2.09


def _ev(t: float, ev: str, **kw: object) -> dict:
    return {"t": t, "ev": ev, **kw}


def test_a_colocated_gen_holds_both_hand_overs_and_the_awake_first_round_is_left_out() -> None:
    """Rounds start at 0, 100, 200 (end 300); hand-overs of 5 s. Round 1: to the engine at
    100, generation to 140, to the trainer to 145, training 145-190; round 2 the same from
    200. Windows 100-200 and 200-300: step 100, gen 45 (100 to the first training at 145),
    training 45."""
    events = [_ev(0, "run_start"), _ev(0, "rollout_start", round=0),
              _ev(30, "rollout_complete"), _ev(30, "placement_switch", to="trainer"),
              _ev(35, "train_start"), _ev(80, "train_end", batch=0)]
    for t0 in (100, 200):
        events += [_ev(t0, "rollout_start"), _ev(t0, "placement_switch", to="engine"),
                   _ev(t0 + 40, "rollout_complete"),
                   _ev(t0 + 40, "placement_switch", to="trainer"),
                   _ev(t0 + 45, "train_start"), _ev(t0 + 90, "train_end", batch=t0)]
    events.append(_ev(300, "run_end"))
    got = runs.summary(events)
    assert got["windows"] == 2 and got["step_s"] == 100
    assert got["gen_s"] == 45 and got["train_s"] == 45


def test_the_replicas_mean_generation_and_the_longest_lead_are_read_per_window() -> None:
    """verl's generate_sequences is the mean over ranks: replicas 0 and 1 admitted at 100,
    finishing at 130 and 160: mean 45 s, the longest 15 s ahead of it (window 100-200;
    the request admitted before 100 belongs to the left-out window)."""
    events = [_ev(50, "request_admit", group=9, sample=0, engine=1),
              _ev(100, "request_admit", group=0, sample=0, engine=0),
              _ev(100, "request_admit", group=1, sample=0, engine=1),
              _ev(120, "request_finish", group=0, sample=1),  # admitted nowhere: not read
              _ev(130, "request_finish", group=0, sample=0),
              _ev(160, "request_finish", group=1, sample=0),
              _ev(170, "request_finish", group=9, sample=0)]
    assert replica_times(events, [(100.0, 200.0)]) == (45.0, 15.0)


class _Counted(dict):
    """An event that counts the reads of its time."""

    reads = 0

    def __getitem__(self, key: str) -> object:
        _Counted.reads += key == "t"
        return super().__getitem__(key)


def test_replica_times_by_hand() -> None:
    """One window [0, 10): replica 0's request from 0 s to 3 s, replica 1's from 1 s to
    5 s, a finish past the window left out: the mean of the replicas' last finishes less
    the first admission, (3 + 5) / 2 - 0 = 4, and the longest's lead over it, 5 - 4 = 1."""
    events = [{"t": 0.0, "ev": "request_admit", "group": 0, "sample": 0, "engine": 0},
              {"t": 1.0, "ev": "request_admit", "group": 1, "sample": 0, "engine": 1},
              {"t": 3.0, "ev": "request_finish", "group": 0, "sample": 0},
              {"t": 5.0, "ev": "request_finish", "group": 1, "sample": 0},
              {"t": 12.0, "ev": "request_finish", "group": 1, "sample": 0}]
    assert replica_times(events, [(0.0, 10.0)]) == (4.0, 1.0)


def test_replica_times_cuts_each_window_and_reads_as_the_scan_did() -> None:
    """Ten windows of ten seconds over 100 s, a request admitted each second on one of 3
    replicas and finished 0.5-9.5 s later, among train events: in order (each window cut
    by bisection) the same floats as with one event out of order, past every window (every
    event scanned for every window), but each request event's time read at most 4 times
    (once to cut, at most 3 in its window), not once per window (10 x 230)."""
    import random

    rng = random.Random(7)
    events = []
    for i in range(100):
        events.append(_Counted(t=float(i), ev="request_admit", group=i, sample=0,
                               engine=i % 3))
        events.append(_Counted(t=i + rng.randint(1, 19) / 2, ev="request_finish", group=i,
                               sample=0))
        events.append(_Counted(t=i + 0.25, ev="train_start"))
    events.sort(key=lambda e: dict.__getitem__(e, "t"))
    windows = [(10.0 * w, 10.0 * w + 10) for w in range(10)]
    late = _Counted(t=1e3, ev="request_admit", group=-1, sample=0, engine=0)
    want = replica_times([late, *events], windows)  # out of order: every event scanned
    _Counted.reads = 0
    assert replica_times(events, windows) == want
    assert _Counted.reads <= 4 * 200
    assert all(m == m for m in want)  # windows with requests: not NaN


def test_a_colocated_runs_switch_is_less_the_lead_the_fit_found() -> None:
    """runs.switch_of takes the lead out of the published seconds: 74 - 20 at 16 H20s."""
    s = runs.switch_of(runs.ONE_STEP_FSDP2, 16, lead_s=20.0)
    assert s.engine_s == pytest.approx(54.0)
