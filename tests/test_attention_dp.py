"""Attention data parallelism inside a replica (`sim.rollout_attention_dp`): a step is the
estimator's own value for one rank's batch, the KV cache and the weights split as each
rank holds them, a layout the simulator cannot price is one line with exit code 2, and the
silicon sample's attention-DP rows are priced."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.core.config import RunConfig
from harness.sim.engine_spec import resolve_engine
from harness.sim.kernels import source
from harness.sim.kernels.estimator import quiet
from harness.sim.model_config import config_file
from harness.sim.perf import TableDecodeModel
from harness.sim.presets import load_model
from harness.sim.runtime import ACTIVATION_RESERVE_BYTES, kv_capacity_tokens

# Qwen3-30B-A3B on 4 H100s, SGLang (no per-step framework term is charged there): attention
# on 1 GPU per rank, 4 ranks, the experts over EP 4.
DP_ENGINE = dict(model="qwen3-30b-a3b", gpu="h100-sxm", backend="sglang", tp=4, ep=4,
                 attention_dp=4)


@pytest.fixture(scope="module")
def dp_table(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The attention-DP engine's table, built here into a fresh cache."""
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROLLOUTBENCH_CACHE", str(cache))
        mp.setattr(source, "_tables", {})
        yield source.step_table(resolve_engine(**DP_ENGINE))  # type: ignore[arg-type]


def test_an_attention_dp_step_is_the_estimators_own_value_for_one_ranks_batch(
        dp_table) -> None:  # type: ignore[no-untyped-def]
    from aiconfigurator_core.sdk.engine import EngineHandle

    folder = Path(tempfile.mkdtemp())
    shipped = Path(config_file(load_model("qwen3-30b-a3b").config))
    (folder / "config.json").write_text(shipped.read_text())
    # Asked directly: attention TP 1 on each of 4 ranks, experts 1 x 4; the estimator's batch
    # is one rank's, so the replica's 16 and 64 sequences are 4 and 16 a rank.
    with quiet():
        handle = EngineHandle.compile(str(folder), "h100_sxm", "sglang", tp_size=1,
                                      attention_dp_size=4, moe_tp_size=1, moe_ep_size=4,
                                      gemm_quant_mode="bfloat16", moe_quant_mode="bfloat16",
                                      kvcache_quant_mode="bfloat16",
                                      fmha_quant_mode="bfloat16")
        direct = {(16, 2048): handle.decode_step_latency(4, 2048, 2),
                  (64, 8192): handle.decode_step_latency(16, 8192, 2)}
        one_prompt = handle.predict_prefill_latency(1, 4096)
    points = {(b, s): ms for b, s, ms in dp_table.decode_points}
    for key, ms in direct.items():
        assert points[key] == pytest.approx(ms, rel=1e-9)
    assert dp_table.meta["attention_dp"] == 4 and dp_table.meta["tp"] == 4
    model = TableDecodeModel.from_table(dp_table)
    for (b, s), ms in direct.items():  # the fitted form the engine runs on
        assert model.steps_time(1, b, b * s) * 1e3 == pytest.approx(ms, rel=0.15)
    # One prompt is prefilled by one rank whole; four at once, one on each rank, take the
    # time of one (the ranks prefill in the same forward passes).
    single = model.prefill_time(4096, 4096**2, 1)
    assert single * 1e3 == pytest.approx(one_prompt, rel=0.25)
    assert model.prefill_time(4 * 4096, 4 * 4096**2, 4) == pytest.approx(single, rel=1e-12)


def _cfg(**sim: object) -> RunConfig:
    cfg = RunConfig()
    for key, value in sim.items():
        setattr(cfg.sim, key, value)
    return cfg


def test_kv_capacity_per_replica_with_attention_dp() -> None:
    # DeepSeek-V3 FP8 on 8 H200s, EP 8. Its latent cache (61 layers x 576 elements x 2 B a
    # token) is held whole on every GPU that runs attention for the token: all 8 at TP 8,
    # one at attention DP 8, where each GPU caches its own rank's sequences.
    model = load_model("deepseek-v3")
    latent = 61 * 576 * 2
    weights = model.params_b * 1e9  # one byte a weight
    experts = model.expert_params_b * 1e9
    room = 141e9 * 0.85 - ACTIVATION_RESERVE_BYTES
    common = dict(model="deepseek-v3", rollout_gpu="h200-sxm", rollout_tp=8, rollout_ep=8,
                  rollout_precision="fp8", mem_fraction=0.85)
    tp8 = kv_capacity_tokens(_cfg(**common))
    dp8 = kv_capacity_tokens(_cfg(**common, rollout_attention_dp=8))
    assert tp8 == int((room - weights / 8) * 8 / (latent * 8))
    # each GPU holds the non-expert weights whole and an eighth of the experts
    assert dp8 == int((room - (weights - experts) - experts / 8) * 8 / latent)
    # Per GPU, 34.5 GB left for the cache at TP 8 and 19.5 GB at DP 8 (the 17.1B non-expert
    # weights held whole), but each byte holds 8 times the tokens: 8 x 19.5 / 34.5 = 4.52.
    assert dp8 / tp8 == pytest.approx(8 * 19.494 / 34.472, rel=1e-3)
    # A GQA model: Qwen3-30B-A3B's 4 KV heads at TP 4 are one a GPU either way, so only the
    # replicated non-expert weights move its cache.
    q = load_model("qwen3-30b-a3b")
    common = dict(model="qwen3-30b-a3b", rollout_gpu="h100-sxm", rollout_tp=4, rollout_ep=4,
                  mem_fraction=0.85)
    per_token = 48 * 2 * 4 * 128 * 2  # layers x K,V x KV heads x head_dim x 2 B
    dense = (q.params_b - q.expert_params_b) * 2e9
    want = int((80e9 * 0.85 - ACTIVATION_RESERVE_BYTES - dense - q.expert_params_b * 2e9 / 4)
               * 4 / per_token)
    assert kv_capacity_tokens(_cfg(**common, rollout_attention_dp=4)) == want


@pytest.mark.parametrize(("args", "said"), [
    (["--attention-dp", "2"], "--attention-dp: Qwen3-1.7B is dense"),
    (["--model", "qwen3-30b-a3b", "--tp", "4", "--attention-dp", "3"],
     "--attention-dp: 3 must divide TP 4"),
    (["--model", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--tp", "4", "--attention-dp", "4",
      "--step-model", "roofline"], "--attention-dp: attention DP is priced by the measured "
                                   "kernels only"),
    (["--model", "qwen3-30b-a3b", "--gpu", "h800-sxm", "--tp", "4", "--attention-dp", "4"],
     "h800-sxm borrows h100_sxm's kernels"),
])
def test_a_layout_the_simulator_cannot_price_is_one_line(args: list[str], said: str) -> None:
    result = CliRunner().invoke(app, ["steps", "--batch", "1", "--context", "512", *args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], lines


def test_a_run_refuses_attention_dp_on_a_dense_model_before_any_work(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "-R", "4", "--rounds", "1", "--out", str(out),
                                      "--set", "sim.rollout_attention_dp=2"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "use sim.rollout_engines" in lines[0], lines
    assert not (out / "trace.jsonl.zst").exists()


def test_the_silicon_samples_attention_dp_rows_are_priced() -> None:
    import pandas as pd

    from harness.studies.validate.gpu.silicon import SAMPLE_REL, package_dir, per_bin
    from harness.studies.validate.gpu.silicon.prediction import predict

    raw = pd.read_csv(package_dir() / SAMPLE_REL)
    rows = raw[(raw["attention_dp_size"].fillna(1) > 1) & (raw["backend"] == "vllm")
               & (raw["system"] == "h100_sxm")]
    df = predict(rows)
    assert len(df) == len(rows) > 0 and not df.attrs["skipped"]
    assert (df["attention_dp"] == 4).all() and df["kernels_tpot_ms"].notna().all()
    assert df["roofline_tpot_ms"].isna().all()  # the roofline has no attention-DP model
    # the replica steps every rank's sequences: batch per rank x 4, on 16 GPUs
    one = df.iloc[0]
    sim = RunConfig().sim
    sim.model, sim.rollout_gpu, sim.engine_backend = one["model_ref"], "h100-sxm", "vllm"
    sim.rollout_tp, sim.rollout_ep, sim.rollout_attention_dp = 16, 16, 4
    sim.rollout_precision = "fp8"
    from harness.studies.steps import decode_model

    model, _ = decode_model(sim)
    step = 1e3 * model.steps_time(1, 4 * one["batch"], 4 * one["batch"] * one["context"])
    assert one["kernels_ms"] == pytest.approx(step, rel=1e-12)
    table = per_bin(df)
    layout = table[table["by"] == "layout"]
    assert list(layout["bin"]) == ["TP4 EP16 DP4"] and int(layout["n"].iloc[0]) == len(df)
    assert not math.isnan(float(layout["tpot_med"].iloc[0]))
