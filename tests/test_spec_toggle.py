"""Speculative decoding's batch toggle (`sim.spec_max_batch`): speculation only while an
engine runs at most that many sequences (TLT's bs_threshold), worked by hand."""

from __future__ import annotations

import pytest

from harness.core.config import ConfigError, RunConfig
from harness.core.config_io import set_path
from harness.sim.perf import DecodeModel
from harness.sim.speculative import SpecStep, wrap

# Weights 10 ms a step, 0.1 ms of compute a token: a plain step of b sequences takes
# max(10, 0.1 b) ms (tests/test_speculative.py's roofline)
ROOF = DecodeModel(fixed_s=0.0, per_seq_s=0.0, weights_s=0.01, per_ctx_token_s=0.0,
                   compute_per_seq_s=1e-4, prefill_per_token_s=0.0)


def spec(max_batch: int) -> SpecStep:
    cfg = RunConfig()
    for name, value in (("spec_drafter", "ngram"), ("spec_tokens", 3),
                        ("spec_acceptance", 0.8), ("spec_draft_token_s", 0.0),
                        ("spec_max_batch", max_batch)):
        setattr(cfg.sim, name, value)
    step = wrap(cfg.sim, ROOF, model=None)  # type: ignore[arg-type]  (n-grams read no model)
    assert isinstance(step, SpecStep)
    return step


def test_above_the_threshold_a_step_is_plain() -> None:
    """k = 3, alpha = 0.8: E = 2.952. At b = 8 a verification of 32 positions costs 10 ms
    for 2.952 token steps: 100 token steps 100 x 10 / 2.952 = 338.75 ms. At b = 400 always-on
    speculation pays a 160 ms verification for 2.952 (5,420.1 ms for 100); with the toggle
    at 32 the same 100 token steps are plain: 100 x 40 = 4,000 ms; at 33, 100 x 10 ms."""
    on, toggled = spec(0), spec(32)
    assert toggled.steps_time(100, 8, 0) == pytest.approx(1.0 / 2.952, rel=1e-4)
    assert on.steps_time(100, 8, 0) == toggled.steps_time(100, 8, 0)
    assert on.steps_time(100, 400, 0) == pytest.approx(16.0 / 2.952, rel=1e-4)
    assert toggled.steps_time(100, 400, 0) == pytest.approx(4.0)
    # at 32, still on: a verification of 128 positions, 12.8 ms: 100 x 12.8 / 2.952 ms
    assert toggled.steps_time(100, 32, 0) == pytest.approx(1.28 / 2.952, rel=1e-4)
    assert toggled.steps_time(100, 33, 0) == pytest.approx(1.0)  # past it: 100 x 10 ms


def test_the_toggle_survives_a_version_and_a_batch() -> None:
    step = spec(32)
    assert step.at_version(3).max_batch == 32 and step.for_batch(0.5).max_batch == 32


def test_headers_keep_their_shape_until_it_is_set() -> None:
    cfg = RunConfig()
    cfg.sim.spec_drafter = "ngram"
    assert "spec_max_batch" not in cfg.to_dict()["sim"]
    cfg.sim.spec_max_batch = 32
    assert cfg.to_dict()["sim"]["spec_max_batch"] == 32
    cfg.sim.spec_drafter = "off"
    assert "spec_max_batch" not in cfg.to_dict()["sim"]


def test_a_negative_threshold_names_its_field() -> None:
    cfg = RunConfig()
    set_path(cfg, "sim.spec_max_batch=-1")
    set_path(cfg, "sim.spec_drafter=ngram")
    with pytest.raises(ConfigError) as err:
        cfg.validate()
    assert str(err.value).startswith("--set sim.spec_max_batch: must be >= 0")
    assert "\n" not in str(err.value)
