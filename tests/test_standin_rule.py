"""The per-op-class stand-in rule on hand-worked ops, and inside the database where both GPUs
of a pair are measured (H200 -> H100, H100 -> A100), against the one-ratio rule."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from harness.sim.kernels.standin import Dims, OpShape, carry, carry_ops, op_shapes, roofline_ms
from harness.sim.presets import Hardware, load_hardware
from harness.studies.validate.gpu import standin as study

# Two made-up GPUs: B has half A's bandwidth and half its FLOPs, and another link.
A = Hardware("A", 80.0, 2000.0, 1000.0, "linkA", 100.0, 10.0, "test")
B = Hardware("B", 80.0, 1000.0, 500.0, "linkB", 50.0, 5.0, "test")


def test_memory_bound_op_at_its_roofline_scales_by_the_bandwidth_ratio() -> None:
    shape = OpShape("gemm", flops=1e9, bytes=2e9)  # 1 ms of bytes on A, 0.001 ms of FLOPs
    assert roofline_ms(shape, A) == pytest.approx(1.0)
    assert carry(1.0, shape, A, replace(B, bf16_tflops=1000.0)) == pytest.approx(2.0)
    # decode attention reads its KV cache: bandwidth, whatever the FLOPs peak
    kv = OpShape("attention", flops=1e9, bytes=2e9)
    assert carry(1.0, kv, A, replace(B, bf16_tflops=1000.0)) == pytest.approx(2.0)


def test_compute_bound_gemm_scales_by_the_flops_ratio_with_its_overhead() -> None:
    shape = OpShape("gemm", flops=1e12, bytes=1e6)  # 1 ms of FLOPs on A
    # 1.5 ms measured: 1 ms of roofline + 0.5 ms above it, both doubled on half the peak
    assert carry(1.5, shape, A, replace(B, hbm_bandwidth_gbs=2000.0)) == pytest.approx(3.0)


def test_gemm_overhead_scales_with_the_flops_share_of_its_roofline() -> None:
    # on A: 1 ms of bytes, 0.5 ms of FLOPs (share 0.5); on B: 2 ms of bytes, 1 ms of FLOPs
    shape = OpShape("gemm", flops=5e11, bytes=2e9)
    # 1.5 ms measured: roofline 1 -> 2, the 0.5 ms above it x (1 + (2 - 1) * 0.5)
    assert carry(1.5, shape, A, B) == pytest.approx(2.0 + 0.5 * 1.5)


def test_time_above_the_roofline_of_other_ops_is_kept() -> None:
    norm = OpShape("elementwise", bytes=1e6)  # 0.0005 ms of bytes on A, 0.001 ms on B
    assert carry(0.1, norm, A, B) == pytest.approx(0.1 - 0.0005 + 0.001)
    attention = OpShape("attention", flops=1e9, bytes=2e9)  # 1 ms on A, 2 ms on B
    assert carry(1.25, attention, A, B) == pytest.approx(2.25)
    # an op measured below its roofline (the byte count is an estimate) takes the ratio
    assert carry(0.5, attention, A, B) == pytest.approx(1.0)


def test_comm_is_measured_on_one_link_and_scaled_by_the_link_otherwise() -> None:
    ar = OpShape("comm", message_bytes=1e6, calls=3)
    assert carry(0.2, ar, A, replace(B, link="linkA")) == 0.2
    # per call: A 10 us + 1e6 B / 100 GB/s = 20 us; B 5 us + 1e6 / 50 GB/s = 25 us
    assert carry(0.2, ar, A, B) == pytest.approx(0.25)
    assert carry(0.0, ar, A, B) == 0.0


QWEN3_8B = {"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 36,
            "hidden_size": 4096, "num_attention_heads": 32,
            "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 12288,
            "vocab_size": 151936}


def test_gemms_cross_from_bandwidth_to_flops_with_the_token_count() -> None:
    dims = Dims.from_config(QWEN3_8B)
    h100 = load_hardware("h100-sxm")
    bytes_bound = op_shapes(dims, 1, 1, 2048, "decode")["gate_ffn1_gemm"]
    flops_bound = op_shapes(dims, 1, 1, 4096, "prefill")["gate_ffn1_gemm"]
    # weights 4096 x 24576 BF16 per layer, read once at batch 1
    assert bytes_bound.bytes == pytest.approx(2 * 36 * (4096 * 24576 + 4096 + 24576))
    assert roofline_ms(bytes_bound, h100) == pytest.approx(bytes_bound.bytes / 3350e6)
    assert roofline_ms(flops_bound, h100) == pytest.approx(flops_bound.flops / 989.4e9)
    assert op_shapes(dims, 1, 1, 2048, "decode")["ar_1"].calls == 36


def test_moe_touches_only_the_experts_its_tokens_route_to() -> None:
    dims = Dims.from_config({**QWEN3_8B, "architectures": ["Qwen3MoeForCausalLM"],
                             "num_experts": 128, "num_experts_per_tok": 8,
                             "moe_intermediate_size": 768})
    width = 3 * 4096 * 768
    one = op_shapes(dims, 1, 1, 512, "decode")["moe"]
    many = op_shapes(dims, 1, 512, 512, "decode")["moe"]
    assert one.bytes == pytest.approx(2 * 36 * (8 * width + 2 * 8 * 4096))
    assert many.bytes == pytest.approx(2 * 36 * (128 * width + 2 * 512 * 8 * 4096))


def test_carry_ops_prices_every_op_and_unknown_ones_by_the_one_ratio() -> None:
    dims = Dims.from_config(QWEN3_8B)
    h200, h100 = load_hardware("h200-sxm"), load_hardware("h100-sxm")
    ops = {"ar_1": 0.3, "mla_attention": 0.05, "qkv_gemm": 0.6}
    out = carry_ops(ops, dims, 2, 16, 2048, "decode", h200, h100)
    assert out["ar_1"] == 0.3  # same NVLink 4: as measured
    assert out["mla_attention"] == pytest.approx(0.05 * 4800 / 3350)  # no shape: HBM ratio
    assert 0.6 < out["qkv_gemm"] < 0.6 * 4800 / 3350  # memory-bound, not all roofline
    prefill = carry_ops({"mla_attention": 1.0}, dims, 2, 1, 2048, "prefill", h200,
                        load_hardware("a100-80gb-sxm"))
    assert prefill["mla_attention"] == pytest.approx(989.4 / 312.0)  # FLOPs ratio


def test_fp8_weights_halve_a_gemms_weight_bytes_and_its_flops_at_the_bf16_peak() -> None:
    dims = Dims.from_config(QWEN3_8B)
    bf16 = op_shapes(dims, 1, 8, 2048, "decode")
    fp8 = op_shapes(dims, 1, 8, 2048, "decode", weight_bytes=1, kv_bytes=1)
    n, k, m = 24576, 4096, 8
    assert fp8["gate_ffn1_gemm"].flops == pytest.approx(bf16["gate_ffn1_gemm"].flops / 2)
    assert fp8["gate_ffn1_gemm"].bytes == pytest.approx(36 * (n * k + 2 * (m * k + m * n)))
    assert fp8["attention"].bytes < bf16["attention"].bytes  # the KV cache read halves
    assert fp8["logits_gemm"] == bf16["logits_gemm"]  # the LM head stays BF16


# Measured on this grid (aiconfigurator-core 0.12.0, vLLM tables, Qwen3-8B TP2): median
# |error| of the whole step. New rule / one ratio: H200->H100 decode 1.2% / 12.7%, prefill
# 1.2% / 3.6%; H100->A100 prefill 2.8% / 31.4%, decode 17.4% / 11.4% (across a generation
# the new rule is NOT better on decode: A100's attention runs further off its roofline than
# any datasheet ratio says; the study's summary reports it). Bounds sit above the measured.
BEATS_OLD = {("h200-sxm->h100-sxm", "decode"): 0.03, ("h200-sxm->h100-sxm", "prefill"): 0.03,
             ("h100-sxm->a100-80gb-sxm", "prefill"): 0.05}
NOT_BETTER = {("h100-sxm->a100-80gb-sxm", "decode"): 0.20}


@pytest.fixture(scope="module")
def small_study(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    cache: Path = tmp_path_factory.mktemp("standin")
    return study.study(cache, models=(("Qwen3-8B", "Qwen--Qwen3-8B", 2),),
                       batches=(1, 16, 64, 256), contexts=(2048,), prompts=(512, 4096))


def _medians(df: pd.DataFrame, pair: str, phase: str) -> tuple[float, float]:
    rows = df[(df.pair == pair) & (df.phase == phase) & (df.op_class == "step")]
    assert len(rows) > 0
    return float(rows.new_err.abs().median()), float(rows.old_err.abs().median())


def test_new_rule_beats_the_one_ratio_inside_the_database(small_study: pd.DataFrame) -> None:
    for (pair, phase), bound in BEATS_OLD.items():
        new, old = _medians(small_study, pair, phase)
        assert new < bound and new < old, (pair, phase, new, old)
    for (pair, phase), bound in NOT_BETTER.items():
        new, _ = _medians(small_study, pair, phase)
        assert new < bound, (pair, phase, new)
    assert set(small_study.op_class) >= {"gemm", "attention", "elementwise", "comm", "step"}
    assert "| vllm | h200-sxm->h100-sxm | decode | step |" in study.markdown(small_study)


def test_h20_from_h200_and_from_h100_agree(tmp_path: Path) -> None:
    """H20 has no tables; the rule carried from either Hopper should give one answer.
    Measured (Qwen3-8B TP1, vLLM): from H100 / from H200 - 1 within -3.3% .. +4.5%."""
    stem, dims, h20 = "Qwen--Qwen3-8B", Dims.from_config(study.config_of("Qwen--Qwen3-8B")), \
        load_hardware("h20")
    for phase, batch, length in (("decode", 1, 2048), ("decode", 64, 2048),
                                 ("decode", 512, 2048), ("prefill", 1, 2048)):
        steps = []
        for preset, system in (("h200-sxm", "h200_sxm"), ("h100-sxm", "h100_sxm")):
            ops = study._ops(stem, system, "vllm", 1, tmp_path, phase, batch, length)
            steps.append(sum(carry_ops(ops, dims, 1, batch, length, phase,
                                       load_hardware(preset), h20).values()))
        assert steps[1] / steps[0] == pytest.approx(1.0, abs=0.06), (phase, batch, steps)


def test_the_h20_engine_is_the_h200_ops_carried_by_the_rule() -> None:
    import json

    from harness.sim.engine_spec import resolve_engine
    from harness.sim.kernels import source
    from harness.sim.kernels.standin import Dims, carry_ops
    from harness.sim.presets import load_hardware

    h20 = source.estimator(resolve_engine("qwen3-8b", "h20", "vllm", 1))
    h200 = source.estimator(resolve_engine("qwen3-8b", "h200-sxm", "vllm", 1))
    assert h20.gpu.rule == "per-op" and h20.gpu.system == "h200_sxm"
    dims = Dims.from_config(json.loads((h20.folder / "config.json").read_text()))
    ops = h200.decode_ops(16, 2048)
    want = sum(carry_ops(ops, dims, 1, 16, 2048, "decode", load_hardware("h200-sxm"),
                         load_hardware("h20")).values())
    assert h20.decode_ms(16, 2048) == pytest.approx(want, rel=1e-9)
    # H20 has 0.83x the H200's bandwidth and 0.15x its FLOPs: decode a little slower,
    # prefill (bound by FLOPs) several times slower
    assert 1.0 < h20.decode_ms(1, 2048) / h200.decode_ms(1, 2048) < 1.3
    assert h20.prefill_ms(1, 4096) / h200.prefill_ms(1, 4096) > 3
