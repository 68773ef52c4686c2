"""The simulated trainer of a mixture-of-experts model: FLOPs from ACTIVE parameters, the
experts' all-to-all under expert parallelism (`sim.trainer_ep`), and training memory with
the experts split over EP. Every expected value is worked out by hand in the comments."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.sim.feasibility import trainer_gb_per_gpu, trainer_problem
from harness.sim.perf import TrainModel, moe_layers
from harness.sim.presets import load_hardware, load_model

H100 = load_hardware("h100-sxm")  # 989.4 dense BF16 TFLOPS, NVLink 450 GB/s a direction


def test_trainer_flops_count_active_parameters() -> None:
    # Qwen3-30B-A3B: 3.353B active of 30.532B; 8 N a token (6 N train + 2 N recompute)
    moe = load_model("qwen3-30b-a3b")
    train = TrainModel.build(H100, moe, 8, 0.4, 0.05)
    assert train.flops_per_token == pytest.approx(8 * 3.353e9)
    # the optimizer still touches every parameter: 16 B x 30.532e9 / (8 x 3350 GB/s)
    assert train.optimizer_s == pytest.approx(16 * 30.532e9 / (8 * 3350e9))


def test_a_qwen3_30b_a3b_step_at_ep_1_and_ep_8() -> None:
    moe = load_model("qwen3-30b-a3b")
    assert moe_layers(moe) == 48  # 28.991B expert params / (128 x 3 x 2048 x 768)
    micro = [1024] * 16  # 16,384 tokens
    # compute: 16,384 x 26.824e9 + 16 x (4 x 48 x 32 x 128 x 0.5 x 4) x 1024^2
    #        = 4.65873e14 FLOPs over 8 x 989.4e12 x 0.4 = 3.16608e15 FLOP/s: 0.147145 s
    ep1 = TrainModel.build(H100, moe, 8, 0.4, 0.05, ep=1)
    assert ep1.micro_time(micro) == pytest.approx(0.05 + 0.147145, rel=1e-5)
    # EP 8: per token 6 all-to-alls x 48 layers x 2048 x 2 B x top-8 x 7/8 leave the GPU
    # = 8,257,536 B; a GPU sends its 1/8 of the tokens at 450 GB/s: 2.29376e-6 s a token,
    # 0.0375810 s for 16,384 tokens
    ep8 = TrainModel.build(H100, moe, 8, 0.4, 0.05, ep=8)
    assert ep8.all_to_all_per_token_s == pytest.approx(2.29376e-6)
    assert ep8.micro_time(micro) == pytest.approx(0.05 + 0.147145 + 0.037581, rel=1e-5)
    # a dense model exchanges nothing, whatever EP is asked
    dense = TrainModel.build(H100, load_model("qwen2.5-7b"), 8, 0.4, 0.05, ep=8)
    assert dense.all_to_all_per_token_s == 0.0


def test_trainer_memory_splits_the_experts_over_ep() -> None:
    moe = load_model("qwen3-30b-a3b")  # 30.532B, 28.991B of them routed experts
    # dense 1.541B x 16 B / 8 = 3.082 GB; experts' weights+grads 4 B x 28.991 / EP;
    # their optimizer 12 B x 28.991 / 8 = 43.4865 GB
    assert trainer_gb_per_gpu(moe, 8, 1) == pytest.approx(3.082 + 115.964 + 43.4865)
    assert trainer_gb_per_gpu(moe, 8, 8) == pytest.approx(3.082 + 14.4955 + 43.4865)
    # EP = GPUs is the fully sharded bound: 16 x 30.532 / 8 = 61.064 GB
    assert trainer_gb_per_gpu(moe, 8, 8) == pytest.approx(16 * 30.532 / 8)
    # 0.8 x 80 GB = 64 GB: EP 8 (61.1) fits, EP 4 (75.6) does not; EP 1 names EP 8
    assert trainer_problem(moe, "qwen3-30b-a3b", H100, "h100-sxm", 8, 8) is None
    said = trainer_problem(moe, "qwen3-30b-a3b", H100, "h100-sxm", 8, 4)
    assert said is not None and "75.6 GB on each of 8" in said
    said = trainer_problem(moe, "qwen3-30b-a3b", H100, "h100-sxm", 8, 1)
    assert said is not None and "162.5 GB" in said and "use sim.trainer_ep=8" in said
    # a dense model's bound is the one it always had: 16 B x 7.616e9 / 8
    assert trainer_gb_per_gpu(load_model("qwen2.5-7b"), 8, 1) == pytest.approx(15.232)


@pytest.mark.parametrize(("args", "said"), [
    (["--set", "sim.trainer_ep=2"],
     "--set sim.trainer_ep=2: qwen3-1.7b has no experts to split (EP 2); use 1"),
    (["--set", "sim.trainer_ep=3"],
     "sim.trainer_ep: must be >= 1 and divide the trainer's 8 GPUs, got 3"),
])
def test_a_bad_trainer_ep_is_one_line(tmp_path: Path, args: list[str], said: str) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "-R", "4", "--rounds", "1", "--out", str(out),
                                      *args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], lines
    assert not (out / "trace.jsonl.zst").exists()


def test_a_run_charges_its_trainer_ep(tmp_path: Path) -> None:
    from harness.core.config import RunConfig
    from harness.sim.runtime import SimRuntime

    cfg = RunConfig()
    s = cfg.sim
    s.model, s.rollout_gpu, s.rollout_tp = "qwen3-30b-a3b", "h100-sxm", 1
    s.trainer_gpu, s.trainer_gpus, s.trainer_ep = "h100-sxm", 8, 8
    s.train_model = "mfu"  # the MFU line's all-to-all (the kernel trainer prices EP itself)
    runtime = SimRuntime(cfg.validate(), tmp_path / "trace.jsonl")
    assert runtime.trainer._model.all_to_all_per_token_s == pytest.approx(2.29376e-6)
