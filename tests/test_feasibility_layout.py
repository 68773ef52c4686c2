"""The trainer's memory check knows its pipeline (PP and virtual stages) and names the
option that is short; a TP group that spans servers is priced over their NICs."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.sim.feasibility import stage_layers, trainer_gb_per_gpu, trainer_problem
from harness.sim.perf import DecodeModel
from harness.sim.presets import load_hardware, load_model

V3, H100 = load_model("deepseek-v3"), load_hardware("h100-sxm")


def test_pipeline_stages_hold_their_layers_rounded_up() -> None:
    assert stage_layers(61, 16) == 4  # ceil(61 / 16)
    assert stage_layers(61, 6) == 11 and stage_layers(61, 6, 2) == 12  # 2 x ceil(61 / 12)
    assert stage_layers(61, 1) == 61


def test_deepseek_v3_on_256_h100_at_ep16_pp16_fits() -> None:
    # busiest stage: ceil(61/16) = 4 layers, all MoE; embedding 129,280 x 7,168 = 0.92668B;
    # a layer's dense part (17.117B - 2 x 0.92668B) / 61 = 0.250224B; stage dense
    # 4 x 0.250224 + 0.92668 = 1.927574B; stage experts 653.909B x 4 / 58 = 45.097172B.
    # 4 B x 1.927574 + 12 B x 1.927574 x 16/256 + 4 B x 45.097172 / 16
    # + 12 B x 45.097172 x 16/256 = 7.7103 + 1.4457 + 11.2743 + 33.8229 = 54.253 GB < 64
    assert trainer_gb_per_gpu(V3, 256, 16, 16) == pytest.approx(54.2531, abs=1e-3)
    assert trainer_problem(V3, "deepseek-v3", H100, "h100-sxm", 256, 16, 16) is None
    # without PP the old bound: 16 B x 17.117 / 256 + 4 B x 653.909 / 16 + 12 B x 653.909
    # / 256 = 1.0698 + 163.4773 + 30.6520 = 195.2 GB
    assert trainer_gb_per_gpu(V3, 256, 16) == pytest.approx(195.199, abs=1e-3)


def test_the_refusal_names_ep_or_pp_not_the_engines(tmp_path) -> None:
    args = ["run", "--out", str(tmp_path / "o"), "--system", "verl", "-R", "8", "-K", "8",
            "--set", "sim.model=deepseek-v3", "--set", "sim.rollout_tp=32", "--set",
            "sim.rollout_engines=8", "--set", "sim.rollout_gpu=h100-sxm", "--set",
            "sim.placement=colocated", "--set", "sim.trainer_ep=16"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: --set sim.trainer_ep=16: training deepseek-v3")
    assert "195.2 GB on each of 256" in lines[0]
    assert lines[0].endswith("use sim.trainer_ep=128 or sim.trainer_pp=16")


@pytest.mark.parametrize(("sets", "said"), [
    (["sim.trainer_vpp=2"], "sim.trainer_vpp: must be 1, or >= 2 with sim.trainer_pp >= 2"),
    (["sim.trainer_pp=3"], "sim.trainer_pp: must be >= 1 and, times sim.trainer_ep=1, "
                           "divide the trainer's 8 GPUs, got 3"),
    (["sim.trainer_pp=8", "sim.trainer_vpp=8"],
     "--set sim.trainer_pp=8: PP 8 x VPP 8 = 64 pipeline chunks exceed qwen3-1.7b's 28"),
])
def test_a_bad_pipeline_is_one_line_naming_the_field(tmp_path, sets: list[str],
                                                     said: str) -> None:
    args = ["run", "-R", "4", "--rounds", "1", "--out", str(tmp_path / "o"),
            "--set", "sim.model=qwen3-1.7b"]
    for one in sets:
        args += ["--set", one]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], lines
    assert not (tmp_path / "o" / "trace.jsonl.zst").exists()


def test_a_tp_group_spanning_four_servers_all_reduces_over_the_nic() -> None:
    # TP 32 on H100s: 2 x 61 all-reduces a step, each at 25 us (not NVLink's 6 us);
    # 122 x 7,168 x 2 B x 2 x 31/32 = 3,388,672 B a sequence over 50 GB/s (not 450)
    roof = DecodeModel.build(H100, V3, 32, 1.0, 0.0, 1.0)
    assert roof.fixed_s == pytest.approx(122 * 25e-6)
    assert roof.per_seq_s == pytest.approx(3_388_672 / 50e9)
    within = DecodeModel.build(H100, V3, 8, 1.0, 0.0, 1.0)  # one server: NVLink
    assert within.fixed_s == pytest.approx(122 * 6e-6)
    assert within.per_seq_s == pytest.approx(122 * 7168 * 4 * 7 / 8 / 450e9)
