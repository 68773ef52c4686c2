"""verl's would-need families: which run a missed claim reads and what value it takes."""

from __future__ import annotations

import pytest

from harness.studies.reproduce.family import Miss
from harness.studies.reproduce.verl_async import runs
from harness.studies.reproduce.verl_async.would_need import (
    VerlTrainScale,
    VerlWait,
    base_reading,
    baseline_of,
    label_of,
    value,
)


def _miss(claim: str, config: str, reading: str = "lengths from gen") -> Miss:
    return Miss(runs.PAPER, claim, config, 1.0, 1.0, 2.0, 0.1, reading)


def test_a_claim_names_its_run_and_its_fit() -> None:
    script = "lengths from training, staleness 0.1 (32_32.sh:74), first 100 steps"
    assert base_reading(script) == "lengths from training"
    assert base_reading(f"lengths from gen, {runs.SWAPPED}, 300 steps") == (
        f"lengths from gen, {runs.SWAPPED}")
    cases = {
        ("fully async step (s)", "fully async 16:16 (README.md:357)",
         "lengths from gen, staleness 0.1 (16_16.sh:74)"): "fully async 16:16 s=0.1",
        ("fully async step (s)", "64:64 require_batches=4 (README.md:408)",
         "lengths from gen, 300 steps"): "fully async 64:64",
        ("30B speedup over colocate sync (x, 400 steps)", "Qwen3-30B-A3B 96:32",
         "lengths from gen"): "30B fully async 96:32",
        ("one-step-off step (s)", "one-step-off Megatron: 4:12 (osp.md:67)",
         "lengths from gen"): "one-step-off 4:12 Megatron",
        ("streaming gain over colocate sync (x, approximately)", "64:64 s=0 (README.md:368)",
         "lengths from gen"): "64:64 s=0",
    }
    labels = {r.label for r in runs.runs(0)}
    for (claim, config, reading), want in cases.items():
        got = label_of(_miss(claim, config, reading))
        assert got == want and got in labels
    assert baseline_of("fully async 32:32 s=0.1") == "colocate 64"
    assert baseline_of("64:64 s=0") == "colocate 128"
    assert baseline_of("one-step-off 4:12 FSDP2") == "osp colocate 16 FSDP2"


def test_a_claims_value_is_the_claims_tables() -> None:
    """As `claims`: speedup 300 / 120; the 7B's update GPU-seconds 60 / 2 / (90 x 0.8);
    Megatron one-step-off's per trajectory 60 / (90 x 16 / 16); the 30B's 60 x 32 /
    (90 x 128)."""
    run = {"step_s": 120.0, "gen_s": 7.0, "wait_s": 9.0, "train_s": 60.0}
    base = {"step_s": 300.0, "gen_s": 1.0, "wait_s": 1.0, "train_s": 90.0}
    assert value("speedup over colocate sync (x, 400 steps)", "fully async 16:16", run,
                 base) == pytest.approx(2.5)
    assert value("update_actor GPU-seconds, fully async / colocate", "fully async 16:16", run,
                 base) == pytest.approx(60 / 2 / 72)
    assert value("one-step-off training GPU-seconds a trajectory / colocate",
                 "one-step-off 4:12 Megatron", run, base) == pytest.approx(60 / 90)
    assert value("30B training GPU-seconds, fully async / colocate", "30B fully async 96:32",
                 run, base) == pytest.approx(60 * 32 / (90 * 128))
    assert value("fully async gen: trainer wait (s)", "fully async 16:16", run, base) == 7.0
    assert value("one-step-off wait_prev_gen (s)", "one-step-off 4:12 FSDP2", run, base) == 9.0
    assert value("30B fully async ref + update_actor (s)", "30B fully async 96:32", run,
                 base) == 60.0


def test_the_families_take_their_claims() -> None:
    train, wait = VerlTrainScale(), VerlWait()
    assert train.matches(_miss("fully async step (s)", "fully async 16:16 (README.md:357)"))
    assert wait.matches(_miss("fully async gen: trainer wait (s)", "fully async 16:16"))
    assert not train.matches(_miss("fully async gen: trainer wait (s)", "fully async 16:16"))
    assert len(train.pending) == 1 and len(wait.pending) == 1
