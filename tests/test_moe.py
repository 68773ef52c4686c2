"""Mixture-of-experts and FP8 engines: the measured-kernel table holds the estimator's own
values at its points, the layout reaches the estimator and the table's identity, the
roofline and the KV cache count what a MoE and a latent cache really hold, and a bad MoE
config or layout is one line with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.core import notes
from harness.sim.engine_spec import resolve_engine
from harness.sim.kernels import source
from harness.sim.kernels.estimator import quiet
from harness.sim.model_config import config_file
from harness.sim.perf import DecodeModel, TableDecodeModel
from harness.sim.presets import load_hardware, load_model
from tests.refusals import run_refusal

QWEN_MOE = ("qwen3-30b-a3b", "h100-sxm", "vllm", 1)


@pytest.fixture(scope="module")
def moe_table(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """Qwen3-30B-A3B's table, built here (no MoE table ships)."""
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROLLOUTBENCH_CACHE", str(cache))
        mp.setattr(source, "_tables", {})
        yield source.step_table(resolve_engine(*QWEN_MOE))


def test_a_moe_step_is_the_estimators_own_value_at_table_points(moe_table) -> None:
    from aiconfigurator_core.sdk.engine import EngineHandle

    # The estimator asked directly, with the formats stated as the resolver states them.
    folder = Path(config_file(load_model("qwen3-30b-a3b").config)).parent
    with quiet():
        handle = EngineHandle.compile(_folder(folder), "h100_sxm", "vllm",
                                      tp_size=1, moe_tp_size=1, moe_ep_size=1,
                                      gemm_quant_mode="bfloat16", moe_quant_mode="bfloat16",
                                      kvcache_quant_mode="bfloat16",
                                      fmha_quant_mode="bfloat16")
        direct = {(b, s): handle.decode_step_latency(b, s, 2) for b, s in ((1, 1024), (64, 4096))}
    points = {(b, s): ms for b, s, ms in moe_table.decode_points}
    for key, ms in direct.items():
        assert points[key] == pytest.approx(ms, rel=1e-9)
    model = TableDecodeModel.from_table(moe_table)
    for b, s, ms in moe_table.decode_points:  # the fitted form, as docs/simulator.md says
        assert model.steps_time(1, b, b * s) * 1e3 == pytest.approx(ms, rel=0.15)
    assert moe_table.meta["model"] == "Qwen3-30B-A3B" and "ep" not in moe_table.meta


def _folder(shipped: Path) -> str:
    """A folder holding Qwen3-30B-A3B's config as config.json (the estimator reads one)."""
    import tempfile

    folder = Path(tempfile.mkdtemp())
    (folder / "config.json").write_text(
        (shipped / "Qwen--Qwen3-30B-A3B_config.json").read_text())
    return str(folder)


def test_the_layout_reaches_the_table_identity_and_a_dense_bf16_one_keeps_its_own() -> None:
    dense = resolve_engine("qwen3-1.7b", "a100-40gb-pcie", "sglang", 2)
    meta, _, _ = source.identity(dense)
    assert not {"ep", "precision", "kv_dtype"} & meta.keys()  # shipped tables still match
    keys = {source.identity(resolve_engine("qwen3-30b-a3b", "h100-sxm", "sglang", 2, **kw))[1]
            for kw in ({}, {"ep": 2}, {"precision": "fp8"}, {"kv_dtype": "fp8"})}
    assert len(keys) == 4
    fp8 = resolve_engine("deepseek-v3", "h200-sxm", "vllm", 8, ep=8, precision="fp8")
    # DeepSeek-V3's checkpoint is block-scaled (weight_block_size [128, 128] in its config)
    assert fp8.estimator_kwargs() == {
        "gemm_quant_mode": "fp8_block", "moe_quant_mode": "fp8_block",
        "kvcache_quant_mode": "bfloat16", "fmha_quant_mode": "bfloat16",
        "moe_tp_size": 1, "moe_ep_size": 8}
    assert dense.estimator_kwargs() == {}


def test_the_roofline_reads_the_experts_a_step_routes_to() -> None:
    model, hw = load_model("qwen3-30b-a3b"), load_hardware("h100-sxm")
    roof = DecodeModel.build(hw, model, 1, 1.0, 0.0, 1.0)
    bw = hw.hbm_bandwidth_gbs * 1e9
    # one sequence, no context: the non-expert weights and 8 of each layer's 128 experts
    want = model.step_weight_bytes(1) / bw
    assert roof.steps_time(1, 1, 0) == pytest.approx(want, rel=1e-9)
    fp8 = DecodeModel.build(hw, model, 1, 1.0, 0.0, 1.0, weight_bytes=1)
    assert fp8.steps_time(1, 1, 0) == pytest.approx(want / 2, rel=1e-9)


def test_a_latent_cache_is_held_whole_on_every_gpu() -> None:
    # DeepSeek-V3: 61 layers x 576 latent elements x 2 bytes a token, on each of 8 GPUs
    spec = resolve_engine("deepseek-v3", "h200-sxm", "sglang", 8, ep=8)
    assert spec.kv_bytes_per_token() == 61 * 576 * 2 * 8
    # Qwen3-235B-A22B has 4 KV heads: at TP 8 each is held on 2 GPUs
    gqa = resolve_engine("qwen3-235b-a22b", "h100-sxm", "sglang", 8)
    assert gqa.kv_bytes_per_token() == 2 * 94 * 4 * 128 * 2 * 2


def _moe_config(tmp_path: Path, **changes: object) -> str:
    shipped = Path(config_file(load_model("qwen3-30b-a3b").config))
    raw = {**json.loads(shipped.read_text()), **changes}
    raw = {k: v for k, v in raw.items() if v is not None}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    return str(path)


@pytest.mark.parametrize(("changes", "said"), [
    ({"num_experts_per_tok": 200}, "num_experts_per_tok 200 must lie in 1..128 experts"),
    ({"moe_intermediate_size": None}, "missing field 'moe_intermediate_size'"),
    ({"num_experts": 0}, "num_experts should be a positive integer, got 0"),
    ({"architectures": ["Qwen3NextForCausalLM"]},
     "architecture 'Qwen3NextForCausalLM' is not modelled"),
])
def test_a_bad_moe_config_is_one_line(tmp_path: Path, changes: dict[str, object],
                                      said: str) -> None:
    path = _moe_config(tmp_path, **changes)
    result = CliRunner().invoke(app, ["steps", "--model", path, "--gpu", "h100-sxm",
                                      "--tp", "1", "--batch", "1", "--context", "512"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and str(path) in lines[0]


@pytest.mark.parametrize(("args", "said"), [
    (["--set", "sim.rollout_ep=2"], "Qwen3-1.7B has no experts to split (EP 2); use 1"),
    (["--set", "sim.model=qwen3-30b-a3b", "--set", "sim.rollout_ep=4"],
     "sim.rollout_ep: must be >= 1 and divide sim.rollout_tp=2, got 4"),
    (["--set", "sim.rollout_precision=int4"], "sim.rollout_precision: must be bf16 or fp8"),
])
def test_a_bad_layout_is_one_line_before_any_work(tmp_path: Path, args: list[str],
                                                  said: str) -> None:
    assert said in run_refusal(tmp_path, args)


def test_a_moe_trainer_on_a_gpu_without_bf16_expert_kernels_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """a100-40gb-pcie's tables hold no BF16 expert rows: said in one line as the trainer is
    built, before the run, not as numpy's argmin error at the first train step (it was
    `run failed`, exit 1, with a trace behind it); and before any note the build says
    (the weight sync's and train_scale's notes came first)."""
    monkeypatch.setattr(notes, "_said", set())  # this process may have said them already
    out = tmp_path / "run"
    result = CliRunner().invoke(app, [
        "run", "-R", "4", "--rounds", "1", "--out", str(out), "--model", "qwen3-30b-a3b",
        "--gpu", "a100-40gb-pcie", "--set", "sim.trainer_gpu=a100-40gb-pcie",
        "--set", "sim.trainer_gpus=64", "--set", "sim.trainer_ep=8",
        "--set", "sim.rollout_engines=8", "--set", "sim.rollout_tp=4"])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert errors == ["error: sim.trainer_gpu=a100-40gb-pcie: the database has no BF16 MoE "
                      "expert kernels; use sim.train_model=mfu"]
    assert "note:" not in result.output  # the refusal alone: no note before it
    assert not out.exists()  # nothing written
