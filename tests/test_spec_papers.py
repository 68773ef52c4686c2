"""The speculative-rollout papers' reproduction: EfficientRollout's setup against its authors'
scripts, and its claim rows made from a stand-in frame with values worked by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.studies import reproduce
from harness.studies.reproduce.spec_papers import PAPER, nearest, runs
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
    assert (s.spec_drafter, s.spec_tokens, s.spec_max_batch) == ("draft", 7, 0)  # :35, :48
    assert s.spec_draft_model.endswith("drafters/qwen2.5-7b-w4.json")
    assert s.spec_acceptance == 0.8769  # SkyRL's: this paper's is not readable
    assert s.placement == "colocated" and cfg.system == "verl"
    big = er.config("qwen2.5-14b", "rtn", "toggle").sim
    assert (big.model, big.spec_tokens, big.mem_fraction) == ("qwen2.5-14b", 5, 0.7)  # :35, :95
    assert big.spec_max_batch > 0  # the toggle reading: speculation at small batches only


def test_the_w4_stand_ins_hold_the_w4_copies_bytes_and_the_policys_cache() -> None:
    """W_d of sd_toggle/configs/a100_tp1_qwen257b.json:13 and a100_tp1_qwen2514b.json:13
    (5,443,042,304 and 9,721,292,800 B), to 0.02%; the KV cache a token is the policy's:
    28 layers x 4 KV heads x 128 x 2 (K, V) x 2 B = 57,344 and 48 x 8 x 128 x 4 = 196,608."""
    from harness.sim.presets import load_model

    for model, w_d, kv in (("qwen2.5-7b", 5_443_042_304, 57_344),
                           ("qwen2.5-14b", 9_721_292_800, 196_608)):
        stand_in = load_model(er.MODELS[model][2])
        assert stand_in.weight_bytes() == pytest.approx(w_d, rel=2e-4)
        assert stand_in.kv_bytes_per_token() == kv == load_model(model).kv_bytes_per_token()


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
    assert names == ["qwen2.5-7b/no-sd", "qwen2.5-7b/rtn/always-on", "qwen2.5-7b/rtn/toggle",
                     "qwen2.5-14b/no-sd", "qwen2.5-14b/rtn/always-on",
                     "qwen2.5-14b/rtn/toggle"]


# A stand-in frame: seconds a round per run
SIM = pd.DataFrame([
    {"run": "qwen2.5-7b/no-sd", "rollout_s": 100.0, "step_s": 200.0},
    {"run": "qwen2.5-7b/rtn/always-on", "rollout_s": 80.0, "step_s": 180.0},
    {"run": "qwen2.5-7b/rtn/toggle", "rollout_s": 125.0, "step_s": 225.0},
    {"run": "qwen2.5-14b/no-sd", "rollout_s": 300.0, "step_s": 500.0},
    {"run": "qwen2.5-14b/rtn/always-on", "rollout_s": 270.0, "step_s": 470.0},
    {"run": "qwen2.5-14b/rtn/toggle", "rollout_s": 330.0, "step_s": 530.0},
])


def test_the_cuts_by_hand() -> None:
    """100 (1 - sd / base): 7B always-on 20% and 10%, toggle -25% and -12.5%; 14B always-on
    10% and 6%, toggle -10% and -6%."""
    cut = er.reductions(SIM).set_index(["model", "reading"])
    assert cut.loc[("qwen2.5-7b", "always-on"), "rollout_s"] == pytest.approx(20.0)
    assert cut.loc[("qwen2.5-7b", "always-on"), "step_s"] == pytest.approx(10.0)
    assert cut.loc[("qwen2.5-7b", "toggle"), "rollout_s"] == pytest.approx(-25.0)
    assert cut.loc[("qwen2.5-7b", "toggle"), "step_s"] == pytest.approx(-12.5)
    assert cut.loc[("qwen2.5-14b", "always-on"), "step_s"] == pytest.approx(6.0)
    assert cut.loc[("qwen2.5-14b", "toggle"), "rollout_s"] == pytest.approx(-10.0)


def test_the_claim_rows() -> None:
    """Per reading, the best model's cut against the headline's "up to" 19.6% and 12.7%
    (abstract; README.md:25): always-on 20% (7B) holds within 10% of 19.6 (17.64-21.56),
    10% (7B) misses 12.7 (11.43-13.97); toggle -10% (14B) and -6% (14B) miss both."""
    rows = er.claims(SIM, PAPER)
    assert len(rows) == 4 and {c.paper for c in rows} == {"spec-papers"}
    assert len({c.key for c in rows}) == 4
    assert all(c.kind == "prediction" and c.tolerance == 0.10 for c in rows)
    by = {(c.reading, c.metric): c for c in rows}
    w4 = by[("always-on", "rollout_s_cut_pct")]
    assert (w4.paper_low, w4.paper_high, w4.within) == (19.6, 19.6, True)
    assert w4.harness == pytest.approx(20.0)
    step = by[("always-on", "step_s_cut_pct")]
    assert (step.paper_low, step.within) == (12.7, False)
    assert step.harness == pytest.approx(10.0)
    own = by[("toggle", "rollout_s_cut_pct")]
    assert (own.harness, own.within) == (pytest.approx(-10.0), False)
    assert by[("toggle", "step_s_cut_pct")].harness == pytest.approx(-6.0)
    assert all("alpha=0.8769 (SkyRL's)" in c.config for c in rows)


def test_the_table_puts_each_sd_runs_cuts_beside_it() -> None:
    table = er.table(SIM).set_index("run")
    assert table.loc["qwen2.5-7b/rtn/always-on", "rollout_cut_pct"] == pytest.approx(20.0)
    assert table.loc["qwen2.5-14b/rtn/toggle", "step_cut_pct"] == pytest.approx(-6.0)
    assert table["rollout_cut_pct"].isna().sum() == 2  # the baselines have none


def test_crossover_is_the_batch_before_the_first_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    """Speedups 1.3, 1.1, 0.9, 1.2 at batches 1-4: it pays up to 2 (a gain again at 4
    does not count); all paying: the largest batch tried; the first losing: 0."""
    from harness.studies import steps

    def fake(gains: list[float]) -> None:
        monkeypatch.setattr(runs, "BATCHES", (1, 2, 3, 4))
        monkeypatch.setattr(steps, "step_rows", lambda sim, batches, contexts: [
            {"speedup": g} for g in gains])

    fake([1.3, 1.1, 0.9, 1.2])
    assert runs.crossover(None, 1024) == 2
    fake([1.3, 1.1, 1.0, 1.2])
    assert runs.crossover(None, 1024) == 4
    fake([0.9, 1.1, 1.0, 1.2])
    assert runs.crossover(None, 1024) == 0


def test_tlt_nearest_is_its_scripts_setup() -> None:
    """mit-han-lab/fastrl@bce3df7a:examples/grpo_7B.sh, line by line; H100 is assumed."""
    cfg = nearest.tlt_config("tlt")
    s = cfg.sim
    assert (cfg.groups, cfg.group_size, cfg.update_groups) == (64, 8, 4)  # :14-16
    assert cfg.max_response_tokens == 32768 and s.model == "qwen2.5-7b"  # :18, :10
    assert (s.rollout_engines, s.rollout_tp, s.engine_backend) == (2, 4, "sglang")  # :58-59
    assert (s.mem_fraction, s.spec_max_batch) == (0.4, 32)  # :62, :28
    assert (s.spec_drafter, s.spec_tokens) == ("mtp", 7)
    assert nearest.tlt_config("tlt-always-on").sim.spec_max_batch == 0
    assert nearest.tlt_config("baseline").sim.spec_drafter == "off"


def test_registered_with_the_other_reproductions() -> None:
    assert reproduce.OUTPUTS["spec-papers"] == (
        ("spec-papers.csv", "spec-papers_nearest.csv"), ())
    assert reproduce.READING["spec-papers"][1] == "../docs/reproductions.md#speculation"
    assert reproduce.step_source("spec-papers").startswith("kernels:a100")
