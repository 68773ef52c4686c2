"""The GPUs people run RL on now (GB200 NVL72, B300, H20): their datasheet figures, their
measured kernels, and the link a tensor-parallel group takes when it spans servers."""

import subprocess
import sys
from pathlib import Path

import pytest

from harness.sim.presets import load_hardware

USER = (Path(__file__).parent / "fixtures" / "user_gpu.toml").read_text()


def test_gb200_per_gpu_figures_are_the_nvl72_rack_over_72() -> None:
    # NVL72 datasheet: 13.4 TB HBM3e, 576 TB/s, 360 PFLOPS FP16/BF16 sparse, 72 GPUs
    gpu = load_hardware("gb200")
    assert gpu.memory_gb == round(13_400 / 72)  # 186.1
    assert gpu.hbm_bandwidth_gbs == 576_000 / 72  # 8,000
    assert gpu.bf16_tflops == 360_000 / 72 / 2  # 2,500 dense
    assert gpu.nvlink_domain == 72 and gpu.link_bandwidth_gbs == 1800 / 2


def test_b300_per_gpu_figures_are_the_hgx_server_over_8() -> None:
    gpu = load_hardware("b300-sxm")
    assert gpu.memory_gb == 270.0 and gpu.hbm_bandwidth_gbs == 62_000 / 8
    assert gpu.bf16_tflops == 36_000 / 8 / 2  # 2,250 dense
    assert gpu.nvlink_domain == 8 and gpu.internode_bandwidth_gbs == 800 / 8  # CX-8 800 Gb/s


def test_h20_keeps_its_figures() -> None:
    gpu = load_hardware("h20")
    assert (gpu.memory_gb, gpu.hbm_bandwidth_gbs, gpu.bf16_tflops) == (96.0, 4000.0, 148.0)


@pytest.mark.parametrize(("preset", "system"), [("gb200", "gb200"), ("b300-sxm", "b300_sxm")])
def test_new_blackwell_presets_price_with_their_own_kernels(preset: str, system: str) -> None:
    from harness.sim.kernels.gpus import kernel_gpu
    from harness.sim.kernels.source import describe

    kg = kernel_gpu(preset)
    assert kg is not None and kg.system == system and not kg.stand_in
    for backend in ("vllm", "sglang"):
        assert describe("kernels", preset, backend).startswith(f"kernels:{system}:{backend}-")


def test_a_tp_group_wider_than_the_nvlink_domain_all_reduces_over_the_nic() -> None:
    h100 = load_hardware("h100-sxm")
    assert h100.tp_link(8) == (450.0, 6.0)  # one HGX server: NVLink
    assert h100.tp_link(16) == (50.0, 25.0)  # two servers: 400 Gb/s NIC, 25 us
    gb200 = load_hardware("gb200")
    assert gb200.tp_link(32) == (900.0, 6.0)  # inside one NVL72 rack
    assert gb200.tp_link(144) == (50.0, 25.0)
    pcie = load_hardware("rtx-4090")  # a NIC faster than its own link does not speed it up
    assert pcie.tp_link(16) == (20.0, 25.0)


def test_a_user_gpu_with_a_zero_nvlink_domain_is_one_line(tmp_path) -> None:
    cli = str(Path(sys.executable).parent / "rolloutbench")
    path = tmp_path / "mine.toml"
    path.write_text(USER.rstrip() + "\nnvlink_domain = 0\n")
    done = subprocess.run([cli, "--presets", str(path), "steps", "--model", "qwen3-1.7b",
                           "--gpu", "lab-gpu"], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "nvlink_domain" in done.stderr, done.stderr
