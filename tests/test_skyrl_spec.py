"""SkyRL's speculative-decoding reproduction: its setup against the authors' script, the
acceptance input worked by hand, and the structure of its claim rows."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from harness.sim.speculative import alpha_for, expected_tokens
from harness.studies import reproduce
from harness.studies.reproduce.skyrl_spec import claims, runs


def test_the_runs_are_the_scripts_setup() -> None:
    """NovaSky-AI/SkyRL@a9564572:examples/train/spec_decode/
    run_megatron_dapo_qwen3.5_9b_specdecode.sh, line by line."""
    cfg = runs.config("mtp")
    s = cfg.sim
    assert (s.rollout_engines, s.rollout_tp) == (8, 1)  # :17-18
    assert cfg.max_response_tokens == 8192  # :38, 1024 * 8
    assert (cfg.groups, cfg.update_groups, cfg.group_size) == (32, 32, 8)  # :41-43
    assert s.engine_eager is True  # :45, ENFORCE_EAGER=true
    assert s.trainer_tp == 4  # :53, MEGATRON_TP=4
    assert (s.spec_drafter, s.spec_tokens) == ("mtp", 3)  # :75-76
    assert s.placement == "colocated"  # :109, colocate_all=true
    assert s.mem_fraction == 0.5  # :155, gpu_memory_utilization=0.5
    assert s.micro_batch_tokens == 2048 + 8192  # :37-38, one sample a micro-batch (:139)
    assert (s.engine_backend, s.rollout_gpu, s.dispatch) == ("vllm", "h100-sxm", "round-robin")


def test_the_two_runs_differ_only_in_the_mtp_switch() -> None:
    """spec_decode.mdx:121: "The runs differ only in the MTP switch"."""
    base, mtp = runs.config("baseline").to_dict(), runs.config("mtp").to_dict()
    assert runs.config("baseline").sim.spec_drafter == "off"
    moved = {k for k in base["sim"].keys() | mtp["sim"].keys()
             if base["sim"].get(k) != mtp["sim"].get(k)}
    assert {"spec_drafter", "spec_tokens", "spec_acceptance"} <= moved
    assert all(k.startswith("spec_") for k in moved), moved
    assert {k: v for k, v in base.items() if k != "sim"} == {
        k: v for k, v in mtp.items() if k != "sim"}


def test_alpha_from_the_mean_accepted_length_by_hand() -> None:
    """E = 1 + a + a^2 + a^3 at k = 3: a = 0.8769 gives 1 + 0.8769 + 0.76895361 +
    0.674295420609 = 3.320149; E rises 1 + 2a + 3a^2 = 5.0607 a unit of a, so 3.32 is at
    a = 0.8769 - 0.000149 / 5.0607 = 0.87687, 0.8769 to four places."""
    assert runs.ALPHA == 0.8769
    assert alpha_for(3.32, 3) == pytest.approx(0.87687, abs=1e-5)
    assert expected_tokens(0.8769, 3) == pytest.approx(3.320149, abs=1e-6)
    rows = {c.metric: c for c in claims.acceptance_claims()}
    assert rows["draft_mean_acceptance_length"].kind == "input"
    # vLLM's accepted / drafted = (E - 1) / k = 2.320149 / 3 = 77.338%: SkyRL's 77.3%
    rate = rows["draft_acceptance_rate"]
    assert (rate.kind, rate.paper_low) == ("consistency", 77.3)
    assert rate.harness == pytest.approx(77.3383, abs=1e-4)
    # depth i: alpha^i = 87.69, 76.8954, 67.4295% against 88.6, 77.0, 66.3%
    for depth, (paper, ours) in enumerate(((88.6, 87.69), (77.0, 76.89536),
                                           (66.3, 67.42954)), start=1):
        row = rows[f"draft_acceptance_rate_pos_{depth}"]
        assert (row.kind, row.paper_low, row.paper_high) == ("prediction", paper, paper)
        assert row.harness == pytest.approx(ours, abs=1e-4)


SIM = pd.DataFrame([{"run": "baseline", "rollout_s": 120.0, "train_s": 40.0, "step_s": 165.0},
                    {"run": "mtp", "rollout_s": 60.0, "train_s": 40.0, "step_s": 105.0}])


def test_the_claim_rows() -> None:
    rows = claims.claims(SIM)
    assert len(rows) == 12 and all(c.paper == "skyrl-spec" for c in rows)
    assert len({c.key for c in rows}) == 12
    kinds = [c.kind for c in rows]
    assert (kinds.count("input"), kinds.count("consistency"), kinds.count("prediction"),
            kinds.count("input (not fitted)")) == (1, 1, 7, 3)
    by = {c.claim: c for c in rows}
    # spec_decode.mdx:133-135; the speedups are the printed times' ratios
    speed = by["rollout (generate) speedup, baseline / MTP"]
    assert speed.paper_low == pytest.approx(310.1 / 152.4) and speed.harness == 2.0
    assert by["step speedup, baseline / MTP"].harness == pytest.approx(165 / 105)
    assert by["step speedup, baseline / MTP"].paper_low == pytest.approx(400.7 / 246.8)
    assert (by["MTP rollout (generate) s"].paper_low, by["MTP rollout (generate) s"].harness,
            by["MTP rollout (generate) s"].kind) == (152.4, 60.0, "prediction")
    assert by["baseline rollout (generate) s"].kind == "input (not fitted)"
    assert by["baseline policy train s"].paper_low == 57.3
    # the train time's change (57.3 -> 61.3 s) is left out: 1 by construction here
    assert not any(c.metric == "train_s" and "MTP" in c.claim for c in rows)
    assert all(c.tolerance == 0.10 for c in rows)


def test_registered_with_the_other_reproductions() -> None:
    assert reproduce.OUTPUTS["skyrl-spec"] == (("skyrl-spec.csv",), ())
    assert reproduce.READING["skyrl-spec"][1] == "../docs/reproductions.md#skyrl"
    assert reproduce.step_source("skyrl-spec").startswith("kernels:h100")


def test_simulated_mtp_rollout_is_faster_and_trains_the_same(tmp_path: Path) -> None:
    """Both runs, on the simulator: the MTP rollout is faster by less than E = 3.32 (each
    speculative step costs more than a plain one), and the trainer, which has no draft loss,
    trains the same responses in the same time (why that row is left out)."""
    sim = runs.simulate(0, tmp_path, progress=False).set_index("run")
    ratio = sim.loc["baseline", "rollout_s"] / sim.loc["mtp", "rollout_s"]
    assert 1.0 < ratio < expected_tokens(runs.ALPHA, 3)
    assert sim.loc["mtp", "train_s"] == pytest.approx(sim.loc["baseline", "train_s"])
    assert list(sim["rounds"]) == [runs.ROUNDS - 1] * 2

