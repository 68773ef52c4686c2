"""The kernel trainer as the default (issue #35 §1): a calibration's fitted scale and
per-step fixed cost on its own trainer GPU only, the run's overrides, a probe's knobs,
the trainer's TP and CP, and the memory check under TP. None of `train_scale`,
`train_step_fixed_s`, `trainer_tp` or `trainer_cp` existed before: every test here fails
on the old code."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.config import RunConfig
from harness.sim import calibration
from harness.sim.feasibility import trainer_gb_per_gpu
from harness.sim.knobs import Knobs, active
from harness.sim.presets import load_model
from harness.sim.runtime import SimRuntime
from harness.sim.trainer import constants
from harness.sim.trainer.layout import Layout
from harness.sim.trainer.step import KernelTrainModel

MEGATRON_SCALE = constants.FRAMEWORKS["megatron"]["scale"]

CAL = """[fit]
bw_eff = 0.6
train_mfu = 0.1
train_scale = 4.0
train_step_fixed_s = 30.0

[fixed]
step_overhead_s = 0.002
compute_eff = 0.5
micro_overhead_s = 0.05
weight_sync_s = 2.0
materialize_s = 0.1
drift = 0.002
switch_s = 4.0

[hardware]
trainer_gpu = "h100-sxm"
trainer_framework = "megatron"
"""


@pytest.fixture
def cal(tmp_path: Path) -> str:
    path = tmp_path / "mine.toml"
    path.write_text(CAL)
    return str(path)


def runtime(tmp_path: Path, **sim: object) -> SimRuntime:
    cfg = RunConfig(groups=8, rounds=1)
    cfg.sim.trainer_gpu = "h100-sxm"
    for key, value in sim.items():
        setattr(cfg.sim, key, value)
    return SimRuntime(cfg.validate(), tmp_path / "t.jsonl")


def test_the_default_takes_the_frameworks_measured_scale_and_no_step_cost(
        tmp_path: Path) -> None:
    model = runtime(tmp_path).trainer._model
    assert isinstance(model, KernelTrainModel)
    assert model.constants["scale"] == MEGATRON_SCALE and model.step_fixed_s == 0.0


def test_a_calibrations_fit_applies_on_its_own_gpu(tmp_path: Path, cal: str) -> None:
    model = runtime(tmp_path, calibration=cal).trainer._model
    assert (model.constants["scale"], model.step_fixed_s) == (4.0, 30.0)
    # the per-step fixed cost is added to the optimizer step, whole: 30 s on top
    bare = KernelTrainModel(model.gpu, model.hw, model.model, model.layout, model.framework,
                            scale=4.0)
    assert model.optimizer_s - bare.optimizer_s == pytest.approx(30.0)


def test_on_another_gpu_the_framework_constant_and_a_note(
        tmp_path: Path, cal: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.core import notes

    monkeypatch.setattr(notes, "_said", set())
    model = runtime(tmp_path, calibration=cal, trainer_gpu="h200-sxm").trainer._model
    assert (model.constants["scale"], model.step_fixed_s) == (MEGATRON_SCALE, 0.0)
    said = capsys.readouterr().err
    assert all(len(line) <= 100 for line in said.splitlines())  # wrapped as every note
    err = " ".join(said.split())
    assert f"sim.train_scale = {MEGATRON_SCALE:g}: megatron's measured constant" in err
    assert "belongs to h100-sxm trainers" in err


def test_the_runs_own_values_win(tmp_path: Path, cal: str) -> None:
    model = runtime(tmp_path, calibration=cal, train_scale=2.5,
                    train_step_fixed_s=0.0).trainer._model
    assert (model.constants["scale"], model.step_fixed_s) == (2.5, 0.0)


def test_a_probe_sets_the_scale_and_a_train_mfu_probe_takes_the_mfu_line(
        tmp_path: Path) -> None:
    with active(Knobs(params={"train_scale": 3.0, "train_step_fixed_s": 7.0})):
        model = runtime(tmp_path).trainer._model
    assert (model.constants["scale"], model.step_fixed_s) == (3.0, 7.0)
    with active(Knobs(params={"train_mfu": 0.2})):
        assert not isinstance(runtime(tmp_path).trainer._model, KernelTrainModel)


def test_a_set_train_mfu_is_the_users_mfu_line(tmp_path: Path) -> None:
    assert not isinstance(runtime(tmp_path, train_mfu=0.3).trainer._model, KernelTrainModel)


def test_the_trainers_tp_and_cp_reach_the_layout(tmp_path: Path) -> None:
    model = runtime(tmp_path, trainer_tp=2, trainer_cp=2).trainer._model
    assert (model.layout.tp, model.layout.cp, model.layout.dp) == (2, 2, 2)


def test_resolve_names_both_for_every_committed_calibration() -> None:
    """Every calibration resolves both numbers, so a probe's knobs may set them."""
    for name in calibration.names():
        cfg = RunConfig()
        cfg.sim.calibration = name
        params = calibration.resolve(cfg.sim)
        assert params["train_scale"] > 0 and params["train_step_fixed_s"] >= 0, name


def test_tp_splits_a_pipeline_stages_whole_weights_and_gradients() -> None:
    # qwen3-8b on 16 GPUs, PP 2: a stage holds 18 of 36 layers and one embedding matrix;
    # Megatron keeps its 4 bytes of weight and gradient whole per data-parallel rank, so
    # TP 2 halves that term; the optimizer's 12 bytes are sharded over every GPU either way.
    m = load_model("qwen3-8b")
    assert not m.tied_embeddings and m.layers == 36
    embed = m.vocab * m.hidden / 1e9
    per_layer = (m.params_b - 2 * embed) / m.layers
    dense = per_layer * 18 + embed
    assert trainer_gb_per_gpu(m, 16, pp=2) == pytest.approx(4 * dense + 12 * dense * 2 / 16)
    assert trainer_gb_per_gpu(m, 16, pp=2, tp=2) == pytest.approx(
        2 * dense + 12 * dense * 2 / 16)
    # fully sharded (no pipeline), TP changes nothing
    assert trainer_gb_per_gpu(m, 16, tp=2) == trainer_gb_per_gpu(m, 16)



def test_a_kernel_priced_run_writes_its_trace(tmp_path: Path) -> None:
    """The tables' numpy floats once reached the virtual clock, and the trace writer
    refused them (msgspec encodes no numpy.float64): a whole run, to its last event."""
    import json

    from harness.run.execute import execute

    cfg = RunConfig(groups=8, rounds=1)
    cfg.sim.trainer_gpu = "h100-sxm"
    execute(cfg.validate(), tmp_path / "t.jsonl")
    events = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert events[-1]["ev"] == "run_end" and any(e["ev"] == "train_end" for e in events)


def test_an_a100_trainer_is_priced_from_tables_that_time_no_windows(tmp_path: Path) -> None:
    """A100's vLLM 0.14.0 attention table has no window_size column (the newer ones do):
    it was a KeyError in every run whose trainer sits on an A100."""
    from harness.sim.trainer import db

    assert "window_size" not in db.tables("a100-80gb-sxm").attention.columns
    model = runtime(tmp_path, trainer_gpu="a100-80gb-sxm").trainer._model
    assert isinstance(model, KernelTrainModel) and model.micro_time([2048]) > 0


def test_a_stream_train_on_half_the_gpus_spreads_over_the_replicas_it_has() -> None:
    """RollPacker's stream trainer trains on the GPUs the engine released: the kernel
    trainer prices that on a layout of those GPUs (8 sequences on 8 of 16 GPUs: one a
    replica either way, so the same time), where the pool's time times 16/8 doubled it."""
    from harness.core.runtime import Group, Prompt, Response
    from harness.sim.components import SimTrainer
    from harness.sim.presets import load_hardware
    from tests.clocks import SimClock

    hw, m = load_hardware("h100-sxm"), load_model("qwen3-1.7b")
    full = KernelTrainModel("h100-sxm", hw, m, Layout(16, fsdp=False), "megatron")
    half = full.on_gpus(8)
    assert half is not None and half.layout.dp == 8
    assert half.micro_time([2048] * 8) == full.micro_time([2048] * 8)
    assert full.on_gpus(8) is half  # kept per count
    assert KernelTrainModel("h100-sxm", hw, m, Layout(16, tp=4), "megatron").on_gpus(6) is None

    prompt = Prompt(0, 1024)
    group = Group(0, 0, prompt, [Response(None, 1024, [[0, 1024]], "finished")  # type: ignore[arg-type]
                                 for _ in range(8)])
    clock = SimClock()
    trainer = SimTrainer(full, None, lambda *a, **k: None, 16384 * 16, 0.0, driver=clock.driver,
                         gpus=16)
    clock.run_until_complete(trainer.train(0, [group], gpus=8))
    assert clock.time() == pytest.approx(full.micro_time([2048] * 8))
