"""The speculative-rollout papers' reproduction: EfficientRollout's setup against its authors'
scripts, and its claim rows made from a stand-in frame with values worked by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.studies import reproduce
from harness.studies.reproduce.spec_papers import PAPER
from harness.studies.reproduce.spec_papers import efficientrollout as er


def test_the_runs_are_the_scripts_setup() -> None:
    """furiosa-ai/EfficientRollout@0ff0bc5b:scripts/run_qwen2.5_7b_sd.sh, line by line."""
    cfg = er.config("qwen2.5-7b", "rtn")
    s = cfg.sim
    assert (cfg.groups, cfg.group_size, cfg.update_groups) == (128, 8, 128)  # :73, :96, :84
    assert cfg.max_response_tokens == 8192  # :75
    assert s.model == "qwen2.5-7b"  # :80
    assert s.micro_batch_tokens == 8 * (1024 + 8192)  # :85 (8 samples), :74-75
    assert (s.engine_backend, s.rollout_tp, s.mem_fraction) == ("vllm", 1, 0.6)  # :92-94
    assert (s.rollout_engines, s.rollout_gpu, s.trainer_gpu) == (
        8, "a100-80gb-sxm", "a100-80gb-sxm")  # :105-106, README.md:37
    assert (s.spec_drafter, s.spec_tokens) == ("draft", 7)  # :35, :48
    assert s.spec_draft_model == "qwen3-1.7b"  # the W4 copy's bytes, in bf16
    assert s.spec_acceptance == 0.8769  # SkyRL's: this paper's is not readable
    assert s.placement == "colocated" and cfg.system == "verl"
    big = er.config("qwen2.5-14b", "rtn", "self-bf16").sim
    assert (big.model, big.spec_tokens, big.mem_fraction) == ("qwen2.5-14b", 5, 0.7)  # :35, :95
    assert big.spec_draft_model == "qwen2.5-14b"  # the self-bf16 reading: the policy itself


def test_baseline_and_sd_runs_differ_only_in_speculation() -> None:
    """The scripts' no-sd and rtn modes differ only in SD_ARGS (:40-48)."""
    base = er.config("qwen2.5-7b", "no-sd").to_dict()
    sd = er.config("qwen2.5-7b", "rtn").to_dict()
    assert er.config("qwen2.5-7b", "no-sd").sim.spec_drafter == "off"
    moved = {k for k in base["sim"].keys() | sd["sim"].keys()
             if base["sim"].get(k) != sd["sim"].get(k)}
    assert moved and all(k.startswith("spec_") for k in moved), moved
    assert {k: v for k, v in base.items() if k != "sim"} == {
        k: v for k, v in sd.items() if k != "sim"}


def test_the_runs_one_baseline_a_model_and_one_sd_run_a_reading() -> None:
    names = [name for name, _ in er.tasks()]
    assert names == ["qwen2.5-7b/no-sd", "qwen2.5-7b/rtn/w4-bytes", "qwen2.5-7b/rtn/self-bf16",
                     "qwen2.5-14b/no-sd", "qwen2.5-14b/rtn/w4-bytes",
                     "qwen2.5-14b/rtn/self-bf16"]


# A stand-in frame: seconds a round per run
SIM = pd.DataFrame([
    {"run": "qwen2.5-7b/no-sd", "rollout_s": 100.0, "step_s": 200.0},
    {"run": "qwen2.5-7b/rtn/w4-bytes", "rollout_s": 80.0, "step_s": 180.0},
    {"run": "qwen2.5-7b/rtn/self-bf16", "rollout_s": 125.0, "step_s": 225.0},
    {"run": "qwen2.5-14b/no-sd", "rollout_s": 300.0, "step_s": 500.0},
    {"run": "qwen2.5-14b/rtn/w4-bytes", "rollout_s": 270.0, "step_s": 470.0},
    {"run": "qwen2.5-14b/rtn/self-bf16", "rollout_s": 330.0, "step_s": 530.0},
])


def test_the_cuts_by_hand() -> None:
    """100 (1 - sd / base): 7B w4 20% and 10%, self -25% and -12.5%; 14B w4 10% and 6%,
    self -10% and -6%."""
    cut = er.reductions(SIM).set_index(["model", "reading"])
    assert cut.loc[("qwen2.5-7b", "w4-bytes"), "rollout_s"] == pytest.approx(20.0)
    assert cut.loc[("qwen2.5-7b", "w4-bytes"), "step_s"] == pytest.approx(10.0)
    assert cut.loc[("qwen2.5-7b", "self-bf16"), "rollout_s"] == pytest.approx(-25.0)
    assert cut.loc[("qwen2.5-7b", "self-bf16"), "step_s"] == pytest.approx(-12.5)
    assert cut.loc[("qwen2.5-14b", "w4-bytes"), "step_s"] == pytest.approx(6.0)
    assert cut.loc[("qwen2.5-14b", "self-bf16"), "rollout_s"] == pytest.approx(-10.0)


def test_the_claim_rows() -> None:
    """Per reading, the best model's cut against the headline's "up to" 19.6% and 12.7%
    (abstract; README.md:25): w4-bytes 20% (7B) holds within 10% of 19.6 (17.64-21.56),
    10% (7B) misses 12.7 (11.43-13.97); self-bf16 -10% (14B) and -6% (14B) miss both."""
    rows = er.claims(SIM, PAPER)
    assert len(rows) == 4 and {c.paper for c in rows} == {"spec-papers"}
    assert len({c.key for c in rows}) == 4
    assert all(c.kind == "prediction" and c.tolerance == 0.10 for c in rows)
    by = {(c.reading, c.metric): c for c in rows}
    w4 = by[("w4-bytes", "rollout_s_cut_pct")]
    assert (w4.paper_low, w4.paper_high, w4.within) == (19.6, 19.6, True)
    assert w4.harness == pytest.approx(20.0)
    step = by[("w4-bytes", "step_s_cut_pct")]
    assert (step.paper_low, step.within) == (12.7, False)
    assert step.harness == pytest.approx(10.0)
    own = by[("self-bf16", "rollout_s_cut_pct")]
    assert (own.harness, own.within) == (pytest.approx(-10.0), False)
    assert by[("self-bf16", "step_s_cut_pct")].harness == pytest.approx(-6.0)
    assert all("alpha=0.8769 (SkyRL's)" in c.config for c in rows)


def test_registered_with_the_other_reproductions() -> None:
    assert reproduce.OUTPUTS["spec-papers"] == (("spec-papers.csv",), ())
    assert reproduce.READING["spec-papers"][1] == "../docs/reproductions.md#speculation"
    assert reproduce.step_source("spec-papers").startswith("kernels:a100")
