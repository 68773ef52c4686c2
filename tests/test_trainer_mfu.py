"""A calibration's train_mfu belongs to its paper's trainer GPU; on another GPU a run
trains at a neutral prior and says so once (issue #26 §1: RolloutPipe's 0.058, fitted to
RTX 4090s, priced an L20 cluster's training at 999.6 s a round)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from harness.core import notes
from harness.core.config import ConfigError, RunConfig, SimConfig
from harness.run.checks import check_run
from harness.run.execute import execute
from harness.sim import calibration, trainer_mfu

L20 = """[gpus.l20]
name = "NVIDIA L20 48GB PCIe"
memory_gb = 48.0
hbm_bandwidth_gbs = 864.0
bf16_tflops = 119.5
link = "pcie4-x16"
link_bandwidth_gbs = 25.0
link_latency_us = 15.0
"""
ROLLOUTBENCH = str(Path(sys.executable).parent / "rolloutbench")
FIT_4090 = 0.05828  # harness/sim/calibration/rolloutpipe.toml [fit]
NEUTRAL_PCIE = 0.20  # harness/sim/presets/trainer_mfu.toml [megatron] pcie
MICRO_OVERHEAD_S = 0.05  # rolloutpipe.toml [fixed]


@pytest.fixture(autouse=True)
def l20(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's own L20 preset, and say_once's memory empty (one process per test)."""
    (tmp_path / "presets.toml").write_text(L20)
    monkeypatch.setenv("ROLLOUTBENCH_PRESETS", str(tmp_path / "presets.toml"))
    monkeypatch.setattr(notes, "_said", set())


def sim(**fields: object) -> SimConfig:
    s = SimConfig(train_model="mfu")  # these tests are the MFU line's (#35: not the default)
    for key, value in fields.items():
        setattr(s, key, value)
    return s


def run(tmp_path: Path, name: str, **fields: object) -> list[dict]:
    cfg = RunConfig(groups=8, rounds=1, seed=3)
    cfg.sim.train_model = "mfu"
    for key, value in fields.items():
        setattr(cfg.sim, key, value)
    execute(check_run(cfg), tmp_path / f"{name}.jsonl")
    return [json.loads(line) for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]


def training_s(events: list[dict]) -> tuple[float, float]:
    """(trainer seconds of the round, of which fixed per-micro-batch overhead)."""
    starts = [e for e in events if e["ev"] == "train_start"]
    ends = [e for e in events if e["ev"] == "train_end"]
    busy = sum(b["t"] - a["t"] for a, b in zip(starts, ends, strict=True))
    return busy, MICRO_OVERHEAD_S * sum(e["micro_batches"] for e in starts)


def test_an_l20_trainer_trains_at_the_neutral_prior_not_the_4090_fit(tmp_path: Path) -> None:
    neutral = run(tmp_path, "neutral", trainer_gpu="l20")
    fitted = run(tmp_path, "fitted", trainer_gpu="l20", train_mfu=FIT_4090)
    assert neutral[0]["sim_params"]["train_mfu"] == NEUTRAL_PCIE
    assert fitted[0]["sim_params"]["train_mfu"] == FIT_4090
    # Trainer seconds = overhead + FLOPs / (8 GPUs x 119.5 TFLOPS x MFU): the same
    # micro-batches at either MFU, so the FLOPs parts stand as 0.20 / 0.05828 = 3.43.
    (t_neutral, o_neutral), (t_fit, o_fit) = training_s(neutral), training_s(fitted)
    assert o_neutral == o_fit > 0
    assert (t_fit - o_fit) / (t_neutral - o_neutral) == pytest.approx(
        NEUTRAL_PCIE / FIT_4090, rel=1e-5)
    assert t_neutral < t_fit / 3  # the 999.6 s a round falls to about 290 s


def test_a_check_says_nothing_so_a_refused_run_prints_its_error_alone(
        capsys: pytest.CaptureFixture[str]) -> None:
    cfg = RunConfig(groups=8, rounds=1)
    cfg.sim.trainer_gpu, cfg.sim.mem_fraction = "l20", 0.05  # no room for the KV cache
    with pytest.raises(ConfigError, match="sim.mem_fraction"):
        check_run(cfg)
    assert capsys.readouterr().err == ""


def plan(gpu: str, out: Path) -> subprocess.CompletedProcess[str]:
    """A four-configuration plan on two worker processes."""
    return subprocess.run(
        [ROLLOUTBENCH, "plan", "--workload", "lsat-ar", "--model", "qwen3-1.7b", "--gpus", "4",
         "--gpu", gpu, "--budget", "4", "--rounds", "1", "-R", "8", "--systems",
         "slime,cgp,verl", "--sampler", "exhaustive", "--jobs", "2", "--out", str(out)],
        capture_output=True, text=True, timeout=300, check=True)


def test_a_plan_says_it_once_before_its_workers_fork(tmp_path: Path) -> None:
    """Two worker processes, one note: the parent says it, they inherit it as said."""
    out = plan("h100-sxm", tmp_path / "plan")
    assert "4 configurations simulated" in out.stdout  # by two workers
    # the kernel trainer prices an H100 (the default since #35): no MFU, so no MFU prior
    assert "trainer: measured kernels (megatron, scale " in out.stdout
    assert "note: sim.train_mfu" not in out.stderr
    # an MI300X has no kernels in the database: the MFU line at its neutral prior, said once
    out = plan("mi300x", tmp_path / "plan-mi300x")
    assert "trainer: MFU 0.3, a neutral prior for mi300x" in out.stdout
    assert out.stderr.count("note: sim.train_mfu = 0.3 assumed") == 1, out.stderr
    assert out.stderr.count("no kernels for mi300x: the MFU line") == 1, out.stderr


def test_the_note_is_said_once_and_names_value_gpu_source_and_override(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("a", "b", "c"):  # three sweep cells alike
        run(tmp_path, name, trainer_gpu="l20")
    err = capsys.readouterr().err
    assert err.count("note: sim.train_mfu") == 1
    note = " ".join(err.split())
    for part in ("sim.train_mfu = 0.2 assumed", "runs on l20", "rolloutpipe's 0.05828",
                 "rtx-4090", "megatron on PCIe", "harness/sim/presets/trainer_mfu.toml",
                 "--set sim.train_mfu=VALUE"):
        assert part in note
    assert all(len(line) <= 100 for line in err.splitlines())


@pytest.mark.parametrize("cal, fields, want", [
    ("rolloutpipe", {}, 0.05828),
    ("april", {"rollout_gpu": "mi300x", "placement": "colocated"}, 0.3),
    ("rollpacker", {"rollout_gpu": "h800-sxm", "placement": "colocated"}, 0.1249),
    ("pipelinerl", {"trainer_gpu": "h100-sxm"}, 0.40),
    ("pipelinerl", {"rollout_gpu": "h100-sxm", "placement": "colocated"}, 0.40),
])
def test_on_the_calibrations_own_gpu_nothing_changes_and_nothing_is_said(
        cal: str, fields: dict, want: float, capsys: pytest.CaptureFixture[str]) -> None:
    assert calibration.resolve(sim(calibration=cal, **fields))["train_mfu"] == want
    assert capsys.readouterr().err == ""


def test_the_calibrations_own_run_is_unchanged(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    head = run(tmp_path, "default")[0]
    assert head["sim_params"]["train_mfu"] == FIT_4090
    assert "train_mfu" not in capsys.readouterr().err


def test_an_explicit_train_mfu_wins_and_nothing_is_said(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert calibration.resolve(sim(trainer_gpu="l20", train_mfu=0.07))["train_mfu"] == 0.07
    assert capsys.readouterr().err == ""


def test_colocated_trains_on_the_rollout_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    """The trainer_gpu field is not read when colocated: the rollout GPU decides."""
    on_h100 = sim(rollout_gpu="h100-sxm", placement="colocated")
    assert calibration.resolve(on_h100)["train_mfu"] == 0.30  # NVLink class
    calibration.say_train_mfu(on_h100)
    assert "runs on h100-sxm" in " ".join(capsys.readouterr().err.split())
    on_4090 = sim(rollout_gpu="rtx-4090", trainer_gpu="l20", placement="colocated")
    assert calibration.resolve(on_4090)["train_mfu"] == FIT_4090
    assert capsys.readouterr().err == ""


def test_the_framework_is_the_calibrations(capsys: pytest.CaptureFixture[str]) -> None:
    """PipelineRL trained with DeepSpeed: its row of the table, named in the note."""
    on_l20 = sim(calibration="pipelinerl", trainer_gpu="l20")
    assert calibration.resolve(on_l20)["train_mfu"] == 0.20
    calibration.say_train_mfu(on_l20)
    assert "deepspeed on PCIe" in " ".join(capsys.readouterr().err.split())


def test_a_measured_or_unlabelled_calibration_is_taken_as_it_is(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    own = tmp_path / "mine.toml"  # a user's file: no [hardware] table
    own.write_text("[fixed]\n" + "\n".join(f"{p} = 0.5" for p in calibration.PARAMS) + "\n")
    assert calibration.resolve(sim(calibration=str(own), trainer_gpu="l20"))[
        "train_mfu"] == 0.5
    measured = sim(calibration="cpu-live", trainer_gpu="l20")  # a [train] table: seconds
    assert calibration.resolve(measured)["train_mfu"] == 1.0
    assert capsys.readouterr().err == ""


def test_gpu_classes_come_from_the_presets_link() -> None:
    assert trainer_mfu.gpu_class("nvlink4") == "scale_up"
    assert trainer_mfu.gpu_class("infinity-fabric") == "scale_up"
    assert trainer_mfu.gpu_class("pcie4-x16") == "pcie"
    assert trainer_mfu.gpu_class("none") == "pcie"


def test_every_fitted_calibration_names_its_trainer_and_keeps_it_on_a_refit() -> None:
    from harness.sim.presets import hardware_names

    table = trainer_mfu.table()
    for name in ("rolloutpipe", "april", "rollpacker", "pipelinerl"):
        hw = calibration.load(name)["hardware"]
        assert hw["trainer_gpu"] in hardware_names()
        assert hw["trainer_framework"] in table
        assert hw["source"]
        written = tomllib.loads("\n".join(calibration.hardware_lines(name)))
        assert written == {"hardware": hw}


def test_every_row_of_the_table_is_a_plausible_mfu() -> None:
    for framework, row in trainer_mfu.table().items():
        assert set(row) == {"scale_up", "pcie"}, framework
        assert all(0 < v < 1 for v in row.values())


def test_describe_says_where_the_mfu_comes_from() -> None:
    assert calibration.describe_train_mfu(sim()) == "MFU 0.05828, calibration rolloutpipe's"
    assert calibration.describe_train_mfu(sim(trainer_gpu="l20")) == (
        "MFU 0.2, a neutral prior for l20")
    assert calibration.describe_train_mfu(sim(trainer_gpu="l20", train_mfu=0.1)) == (
        "MFU 0.1 (sim.train_mfu)")


def test_config_show_names_the_neutral_prior_as_the_source() -> None:
    from harness.cli.config import field_rows

    cfg = RunConfig()
    cfg.sim.trainer_gpu, cfg.sim.train_model = "l20", "mfu"
    rows = {r["field"]: r for r in field_rows(cfg)}
    assert (rows["sim.train_mfu"]["value"], rows["sim.train_mfu"]["source"]) == (
        0.2, "neutral prior for l20")
    rows = {r["field"]: r for r in field_rows(RunConfig())}
    assert rows["sim.train_mfu"]["source"] == "calibration rolloutpipe"
