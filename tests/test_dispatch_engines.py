"""Each framework's engine settings as it runs them (harness/sim/frameworks.py): the
running-batch cap a replica gets when sim.max_running is left at 0."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.core.config import RunConfig
from harness.shared.defaults import resolve_defaults
from harness.sim.frameworks import resolve_max_running, sglang_max_running, vllm_max_num_seqs


def test_sglang_default_is_half_the_kv_at_most_its_request_pool() -> None:
    # 500,000 / 40,960 x 512 = 6,250 -> pool min(max(6,250, 2,048), 4,096) = 4,096
    assert sglang_max_running(500_000, 40_960) == 4096
    # 100,000 / 40,960 x 512 = 1,250 -> the pool's floor 2,048 (< 50,000)
    assert sglang_max_running(100_000, 40_960) == 2048
    # 3,000 tokens: half of them, 1,500, under the floor
    assert sglang_max_running(3_000, 40_960) == 1500


@pytest.mark.parametrize(("memory", "name", "cap"), [
    (80.0, "NVIDIA H100 80GB SXM5", 1024), (96.0, "NVIDIA H20 96GB", 1024),
    (80.0, "NVIDIA A100 80GB SXM", 256), (48.0, "NVIDIA L40S 48GB PCIe", 256)])
def test_vllm_default_follows_the_gpu(memory: float, name: str, cap: int) -> None:
    assert vllm_max_num_seqs(memory, name) == cap


def _cap(system: str, **sim: object) -> int:
    cfg = RunConfig()
    cfg.system = system
    for key, value in sim.items():
        setattr(cfg.sim, key, value)
    cfg = resolve_defaults(cfg.validate())
    resolve_max_running(cfg, cfg.system)  # as the simulated runtime fills it
    return cfg.sim.max_running


def test_each_system_gets_its_frameworks_cap() -> None:
    assert _cap("slime") == 512  # slime's client: 512 a server, under SGLang's 4,096
    assert _cap("cgp") == 512  # built on slime
    assert _cap("verl", engine_backend="vllm") == 1024  # verl passes max_num_seqs
    assert _cap("rollpacker", engine_backend="vllm") == 1024
    assert _cap("skyrl-async") == 1024
    # prime-rl on an A100 80GB: vLLM's own default there
    assert _cap("prime-rl", engine_backend="vllm", rollout_gpu="a100-80gb-sxm") == 256
    assert _cap("slime", max_running=7) == 7  # a value set by hand is kept


def test_a_config_given_another_system_is_filled_again() -> None:
    cfg = RunConfig().validate()
    resolve_max_running(cfg, cfg.system)
    assert cfg.sim.max_running == 512  # slime
    cfg.system, cfg.sim.engine_backend = "verl", "vllm"
    resolve_max_running(cfg, cfg.system)
    assert cfg.sim.max_running == 1024
    cfg.sim.max_running = 64  # by hand, after
    resolve_max_running(cfg, cfg.system)
    assert cfg.sim.max_running == 64


def test_a_negative_cap_is_one_line_naming_the_field(tmp_path) -> None:
    result = CliRunner().invoke(app, ["run", "--out", str(tmp_path / "o"), "--set",
                                      "sim.max_running=-1"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert lines == ["error: --set sim.max_running: must be >= 0"], lines
