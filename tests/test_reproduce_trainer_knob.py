"""The trainer knob a reproduction fits and searches (`reproduce.trainer_knob`, issue #35):
`train_scale` under the kernel trainer, `train_mfu` on the MFU line."""

from __future__ import annotations

import math

import pytest

from harness.studies.reproduce import trainer_knob
from harness.studies.reproduce.trainer_knob import KNOBS, MFU, SCALE


def test_two_probes_give_a_and_b_exactly() -> None:
    # time = 3 + 8 / mfu: 163 s at 0.05 and 83 s at 0.10; time = 5 + 4 x scale: 9 at 1, 13 at 2
    assert trainer_knob.linear(KNOBS[MFU], {"c": 163.0}, {"c": 83.0}) == {
        "c": pytest.approx((3.0, 8.0))}
    assert trainer_knob.linear(KNOBS[SCALE], {"c": 9.0}, {"c": 13.0}) == {
        "c": pytest.approx((5.0, 4.0))}


def test_the_log_fit_finds_the_scale_that_made_the_observations() -> None:
    # two cells, A + B x at x = 2.5: 10 + 4 x 2.5 = 20 and 1 + 30 x 2.5 = 76
    ab = {"a": (10.0, 4.0), "b": (1.0, 30.0)}
    x, rms = trainer_knob.fit_log(KNOBS[SCALE], ab, {"a": 20.0, "b": 76.0})
    assert x == pytest.approx(2.5, rel=1e-6) and rms == pytest.approx(0.0, abs=1e-6)
    # and an MFU: A + B / x at x = 0.2: 10 + 4 / 0.2 = 30
    x, _ = trainer_knob.fit_log(KNOBS[MFU], {"a": (10.0, 4.0)}, {"a": 30.0})
    assert x == pytest.approx(0.2, rel=1e-6)
    # observations off by a factor e^0.1 and e^-0.1 around x = 2.5: rms log error 0.1
    _, rms = trainer_knob.fit_log(KNOBS[SCALE], {"a": (0.0, 4.0), "b": (0.0, 4.0)},
                                 {"a": 10 * math.exp(0.1), "b": 10 * math.exp(-0.1)})
    assert rms == pytest.approx(0.1, rel=1e-6)


def test_the_share_bisection_walks_the_right_way_for_each_knob() -> None:
    # a training share falls with the MFU (0.05 / x) and rises with the scale (0.1 x)
    said: list[str] = []
    assert trainer_knob.bisect(lambda x: 0.05 / x, MFU, 0.02, 0.9, 0.25, 30,
                              said.append) == pytest.approx(0.2, rel=1e-4)
    assert trainer_knob.bisect(lambda x: 0.1 * x, SCALE, 0.5, 30.0, 0.22, 30,
                              said.append) == pytest.approx(2.2, rel=1e-4)
    assert said[0].startswith("  train_mfu=")


def test_each_papers_trainer_knob() -> None:
    # RollPacker's H800 (H100 kernels), RolloutPipe's RTX 4090 (the L40S's kernels) and
    # PipelineRL's H100 are kernel-priced; APRIL's MI300X has no kernels; a run's own
    # sim.train_mfu takes the MFU line
    from harness.studies.reproduce.april import runs as april
    from harness.studies.reproduce.pipelinerl import runs as pipelinerl
    from harness.studies.reproduce.rolloutpipe import runs as rolloutpipe
    from harness.studies.reproduce.rollpacker import runs as rollpacker

    cfg = rollpacker.config("14B/16k", "verl")
    assert trainer_knob.knob(cfg) == SCALE
    assert trainer_knob.knob(rolloutpipe.base_config(0, 1)) == SCALE
    assert {trainer_knob.knob(c) for c in pipelinerl.configs(0).values()} == {SCALE}
    assert trainer_knob.knob(april.config("grpo", "qwen3-4b", "dapo-math-17k", False, 0,
                                         1)) == MFU
    cfg.sim.train_mfu = 0.3
    assert trainer_knob.knob(cfg) == MFU


def test_rollpackers_trainer_family_searches_the_knob_that_prices_its_runs() -> None:
    # before: it searched train_mfu, which moves a kernel-priced run only by switching it
    # to the MFU line
    from harness.sim.calibration import resolve
    from harness.studies.reproduce.rollpacker import runs
    from harness.studies.reproduce.rollpacker.would_need import RollPackerTrainer

    family = RollPackerTrainer()
    assert family.knob == SCALE and "train_scale" in family.parameter
    assert (family.lo, family.hi) == (0.5, 30.0)
    assert family.neutral == resolve(runs.config("14B/16k", "verl").sim)[SCALE]
