"""The kernel-priced trainer (harness/sim/trainer): shapes, layout and optimizer worked by
hand, the option's refusals, and the runtime building it (sim.train_model did not exist
before issue #35 §1: every test below that names it fails on the old code)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.sim.perf import TrainModel
from harness.sim.presets import load_hardware, load_model
from harness.sim.trainer import constants
from harness.sim.trainer.layout import Layout, bubble
from harness.sim.trainer.shapes import Gemm, layer_gemms
from harness.sim.trainer.step import KernelTrainModel, Passes
from tests.refusals import run_refusal


def test_one_dense_layer_has_four_products_of_hand_worked_flops() -> None:
    # Qwen3-1.7B: hidden 2048, 16 heads and 8 KV heads of 128, MLP 6144.
    gemms = layer_gemms(load_model("qwen3-1.7b"), 1024)
    assert [(g.m, g.n, g.k) for g in gemms] == [
        (1024, 4096, 2048), (1024, 2048, 2048), (1024, 12288, 2048), (1024, 2048, 6144)]
    # 2 x 1024 x 2048 x (4096 + 2048 + 12288 + 6144)
    assert sum(g.flops for g in gemms) == 103_079_215_104
    # TP 2 halves each product's n or k
    assert [(g.n, g.k) for g in layer_gemms(load_model("qwen3-1.7b"), 1024, tp=2)] == [
        (2048, 2048), (2048, 1024), (6144, 2048), (2048, 3072)]


def test_a_backward_is_two_products_of_the_forwards_shape() -> None:
    g = Gemm(1024, 4096, 2048)
    assert (g.dgrad().m, g.dgrad().n, g.dgrad().k) == (1024, 2048, 4096)
    assert (g.wgrad().m, g.wgrad().n, g.wgrad().k) == (2048, 4096, 1024)
    assert g.dgrad().flops == g.wgrad().flops == g.flops


def test_the_pipeline_bubble() -> None:
    assert bubble(1, 8) == 0.0
    assert bubble(4, 8) == pytest.approx(3 / 11)  # (p-1) / (m + p - 1)
    assert bubble(4, 8, vpp=2) == pytest.approx(3 / 19)  # (p-1) / (v m + p - 1)


def test_the_optimizer_step_is_adam_at_the_measured_ratio_to_its_bytes() -> None:
    hw, model = load_hardware("h100-sxm"), load_model("qwen3-1.7b")
    k = KernelTrainModel("h100-sxm", hw, model, Layout(8, fsdp=True), "fsdp")
    # 8.81 x 16 bytes x 1.721e9 parameters / 8 GPUs / 3,350 GB/s = 9.052 ms
    assert k.optimizer_s == pytest.approx(8.81 * 16 * 1.721e9 / 8 / 3350e9)
    assert k.optimizer_s == pytest.approx(0.009052, rel=1e-3)
    lora = KernelTrainModel("h100-sxm", hw, model, Layout(8), passes=Passes(weight_grads=False))
    assert lora.optimizer_s == 0.0


def test_a_micro_batch_carries_a_fixed_cost_that_more_gpus_do_not_shrink() -> None:
    hw, model = load_hardware("h100-sxm"), load_model("qwen3-1.7b")
    fixed = constants.FRAMEWORKS["megatron"]["fixed_s"]
    for gpus in (1, 64):
        k = KernelTrainModel("h100-sxm", hw, model, Layout(gpus, fsdp=False), "megatron",
                             passes=Passes(forwards=0))
        assert fixed < k.micro_time([256]) < fixed + 0.05
    # the MFU line's time for the same sequence falls as 1/GPUs with no overhead
    line = TrainModel.build(hw, model, 64, 0.3, 0.0, forwards=0)
    assert line.micro_time([256]) < 0.001


def test_recompute_and_extra_forwards_cost_more_and_lora_less() -> None:
    hw, model = load_hardware("h100-sxm"), load_model("qwen3-1.7b")

    def time(p: Passes) -> float:
        return KernelTrainModel("h100-sxm", hw, model, Layout(1), passes=p).micro_time([8192])

    base = time(Passes(forwards=0))
    assert time(Passes(forwards=0, recompute=True)) > base
    assert time(Passes(forwards=1)) > base
    assert time(Passes(forwards=0, weight_grads=False)) < base


def test_fp8_products_are_priced_from_the_fp8_table() -> None:
    hw, model = load_hardware("h100-sxm"), load_model("qwen3-8b")
    bf16 = KernelTrainModel("h100-sxm", hw, model, Layout(1))
    fp8 = KernelTrainModel("h100-sxm", hw, model, Layout(1), precision="fp8")
    assert fp8.dense_forward_s(16384) < bf16.dense_forward_s(16384)


@pytest.mark.parametrize(("args", "said"), [
    (["--set", "sim.train_model=kernal"], "sim.train_model: must be kernels or mfu"),
    (["--set", "sim.trainer_precision=fp8", "--set", "sim.trainer_gpu=mi300x"],
     "sim.trainer_precision=fp8: the kernel database has no kernels for mi300x"),
    (["--set", "sim.trainer_tp=3"], "sim.trainer_tp x trainer_cp x trainer_pp = 3 must "
     "divide the trainer's 8 GPUs"),
    (["--set", "sim.train_scale=0"], "sim.train_scale: must be > 0"),
])
def test_a_bad_train_model_is_one_line(tmp_path: Path, args: list[str], said: str) -> None:
    assert said in run_refusal(tmp_path, args)


def test_the_runtime_builds_the_kernel_trainer_only_when_asked(tmp_path: Path) -> None:
    from harness.core.config import RunConfig
    from harness.sim.runtime import SimRuntime

    cfg = RunConfig()
    cfg.sim.trainer_gpu = "h100-sxm"
    assert cfg.sim.train_model == "kernels"  # the default since #35
    runtime = SimRuntime(cfg.validate(), tmp_path / "b.jsonl")
    assert isinstance(runtime.trainer._model, KernelTrainModel)
    # one micro-batch per data-parallel replica: 16,384 tokens x 8 GPUs
    assert runtime.trainer._micro_tokens == 16384 * 8
    cfg.sim.train_model = "mfu"
    assert isinstance(SimRuntime(cfg, tmp_path / "a.jsonl").trainer._model, TrainModel)


def test_fp8_training_is_said_in_one_line_without_the_kernel_trainer(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["run", "-R", "4", "--rounds", "1", "--out",
                                      str(tmp_path / "run"), "--set",
                                      "sim.trainer_precision=fp8", "--set",
                                      "sim.train_model=mfu"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "fp8 needs sim.train_model=kernels" in lines[0], lines


def test_the_runtime_trains_in_fp8_when_asked(tmp_path: Path) -> None:
    from harness.core.config import RunConfig
    from harness.sim.runtime import SimRuntime

    cfg = RunConfig()
    cfg.sim.trainer_gpu, cfg.sim.train_model, cfg.sim.trainer_precision = (
        "h100-sxm", "kernels", "fp8")
    model = SimRuntime(cfg.validate(), tmp_path / "t.jsonl").trainer._model
    assert isinstance(model, KernelTrainModel) and model.precision == "fp8"


def test_a_pipeline_stage_runs_a_quarter_of_the_work_plus_its_bubble() -> None:
    hw, model = load_hardware("h100-sxm"), load_model("qwen3-1.7b")

    def time(gpus: int, pp: int) -> float:
        layout = Layout(gpus, pp=pp, fsdp=False, pipeline_micro_batches=8)
        return KernelTrainModel("h100-sxm", hw, model, layout, "megatron",
                                passes=Passes(forwards=0)).micro_time([4096])

    # 4 stages, 8 micro-batches: a quarter of the time, over 1 - 3/11 = 8/11: 11/32
    assert time(4, 4) / time(1, 1) == pytest.approx(11 / 32)


def test_tensor_parallel_adds_four_gathers_and_four_scatters_a_layer() -> None:
    from harness.sim.trainer import db

    hw, model = load_hardware("h100-sxm"), load_model("qwen3-1.7b")
    k = KernelTrainModel("h100-sxm", hw, model, Layout(2, tp=2, fsdp=False),
                         passes=Passes(forwards=0))
    buffer = 4096 * 2048 * 2  # tokens x hidden x BF16
    one = (db.collective_s("h100-sxm", "all_gather", buffer, 2, hw.link_bandwidth_gbs)
           + db.collective_s("h100-sxm", "reduce_scatter", buffer, 2, hw.link_bandwidth_gbs))
    assert k.layer_comm_s(4096) == pytest.approx(4 * one * 28)
    assert KernelTrainModel("h100-sxm", hw, model, Layout(2)).layer_comm_s(4096) == 0.0


def test_expert_parallel_all_to_alls_only_for_a_moe() -> None:
    hw = load_hardware("h100-sxm")
    moe = KernelTrainModel("h100-sxm", hw, load_model("qwen3-30b-a3b"), Layout(8, ep=8),
                           passes=Passes(forwards=0))
    dense = KernelTrainModel("h100-sxm", hw, load_model("qwen3-1.7b"), Layout(8, ep=8),
                             passes=Passes(forwards=0))
    assert moe.layer_comm_s(4096) > 0.0 and dense.layer_comm_s(4096) == 0.0


def test_a_layout_that_cannot_be_is_said() -> None:
    assert Layout(8, tp=3).check() == "tp x pp x cp = 3 must divide the trainer's 8 GPUs"
    assert Layout(8, ep=3).check() == "ep = 3 must divide the trainer's 8 GPUs"
    assert Layout(8, tp=2, pp=2).check() is None and Layout(8, tp=2, pp=2).dp == 2


def test_a_stand_in_gpus_products_are_carried_by_its_peak() -> None:
    from harness.sim.trainer import db

    # H20 borrows H200's tables (presets/kernel_gpus.toml, per-op): a compute-bound GEMM
    # moves by the BF16 peaks' ratio, 989.4 / 148 = 6.69 TFLOPS over TFLOPS.
    h200 = db.gemm_s("h200-sxm", 16384, 4096, 4096)
    h20 = db.gemm_s("h20", 16384, 4096, 4096)
    ratio = load_hardware("h200-sxm").bf16_tflops / load_hardware("h20").bf16_tflops
    assert h20 / h200 == pytest.approx(ratio, rel=0.05)
    # RTX 4090 borrows L40S's (scale rule): its prefill_scale, 2.19
    assert db.gemm_s("rtx-4090", 16384, 4096, 4096) / db.gemm_s(
        "l40s", 16384, 4096, 4096) == pytest.approx(2.19)
