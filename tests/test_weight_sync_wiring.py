"""How a run's weight sync is charged (calibration.resolve -> weight_sync.charge): the
calibration's own time on its own model and trainer GPU, the transfer model for any other
model or GPU (said once), a run's own time as it is, and sim.weight_sync_path checked."""

from __future__ import annotations

import pytest

from harness.core import notes
from harness.core.config import ConfigError, RunConfig
from harness.sim import calibration


def _sim(model: str = "qwen3-1.7b", cal: str = "rolloutpipe", **kw: object) -> RunConfig:
    cfg = RunConfig()
    cfg.sim.model, cfg.sim.calibration = model, cal
    for key, value in kw.items():
        setattr(cfg.sim, key, value)
    return cfg


def _sync(cfg: RunConfig) -> float:
    return calibration.resolve(cfg.validate().sim)["weight_sync_s"]


def test_the_calibrations_own_model_on_its_own_gpu_keeps_its_time() -> None:
    assert _sync(_sim()) == 2.0  # RolloutPipe: Qwen3-1.7B, trainer on RTX 4090s
    assert _sync(_sim("qwen2.5-7b", "pipelinerl", trainer_gpu="h100-sxm",
                      rollout_gpu="h100-sxm")) == 1.0
    assert _sync(_sim("qwen2.5-14b", "rollpacker", rollout_gpu="h800-sxm",
                      placement="colocated")) == 2.0


def test_another_model_is_priced_by_the_transfer_model() -> None:
    # Fails before #35 (2.0 s x 7.616 / 1.721 = 8.85 s). RolloutPipe's layout: 8 RTX 4090
    # trainers + 2 A100 PCIe, different GPUs so 2 nodes: fan 1 + 1.165 = 2.165; 15.232 GB
    # in 512 MiB buckets: 29 x 16.37 ms x 2.165 = 1.02781 s; the link min(25, 8 x 1.5625)
    # = 12.5 GB/s: 1.21856 s. Total 2.24637 s.
    want = 29 * 1.637e-2 * 2.165 + 15.232e9 / 12.5e9
    assert _sync(_sim("qwen2.5-7b")) == pytest.approx(want, rel=1e-9)
    assert want == pytest.approx(2.2464, abs=1e-4)


def test_another_trainer_gpu_is_priced_too() -> None:
    # the own model on H100s: no longer RolloutPipe's cluster
    got = _sync(_sim(trainer_gpu="h100-sxm", rollout_gpu="h100-sxm"))
    # 8 + 2 GPUs: 2 nodes, fan 2.165; 3.442 GB: 7 buckets x 16.37 ms x 2.165; 400 GB/s
    assert got == pytest.approx(7 * 1.637e-2 * 2.165 + 3.442e9 / 400e9, rel=1e-9)


def test_deepseek_v3_on_h100s_no_longer_costs_780_s() -> None:
    # 128 trainers + 16 engines x TP 8, disaggregated, NCCL in 512 MiB buckets
    got = _sync(_sim("deepseek-v3", trainer_gpu="h100-sxm", rollout_gpu="h100-sxm",
                     trainer_gpus=128, rollout_engines=16, rollout_tp=8))
    # 32 nodes: fan 1 + 1.165 x 5 = 6.825; ceil(1342.052e9 / 2^29) = 2500 buckets
    # x 16.37 ms x 6.825 = 279.31 s; 1342.052 GB / 400 GB/s = 3.355 s
    assert got == pytest.approx(2500 * 1.637e-2 * 6.825 + 1342.052e9 / 400e9, rel=1e-9)


def test_a_runs_own_time_and_an_unnamed_calibration_stay_flat() -> None:
    assert _sync(_sim("qwen2.5-7b", weight_sync_s=0.7)) == 0.7
    assert _sync(_sim("qwen2.5-7b", "cpu-live")) == 0.05


def test_a_path_set_on_the_own_model_is_priced() -> None:
    got = _sync(_sim(weight_sync_path="nccl-per-tensor"))
    # 310 tensors x 0.2642 ms x 2.165 + 3.442 GB / 12.5 GB/s
    assert got == pytest.approx(310 * 2.642e-4 * 2.165 + 3.442e9 / 12.5e9, rel=1e-9)


@pytest.mark.parametrize("bad", ["infiniband", "NCCL", ""])
def test_a_bad_path_is_refused_naming_the_field(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"^--set sim.weight_sync_path: must be one of auto, "
                                          r"nccl, nccl-per-tensor, ipc, ipc-per-tensor, "
                                          r"checkpoint-engine, not "):
        _sim(weight_sync_path=bad).validate()


def test_the_run_says_once_which_model_priced_it(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(notes, "_said", set())
    sim = _sim("qwen2.5-7b").sim
    calibration.say_train_mfu(sim)
    calibration.say_train_mfu(sim)
    err = capsys.readouterr().err
    assert err.count("priced by the transfer model") == 1
    assert "calibration rolloutpipe's 2 s" in err and "qwen3-1.7b on rtx-4090" in err
    assert all(len(line) <= 100 for line in err.splitlines())
    monkeypatch.setattr(notes, "_said", set())
    calibration.say_train_mfu(_sim().sim)  # the own model: nothing about the sync
    assert "transfer model" not in capsys.readouterr().err
