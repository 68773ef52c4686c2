"""NVFP4 weights (`sim.rollout_precision = "fp4"`): priced from the database's NVFP4 GEMM and
MoE tables where it has them (Blackwell), refused in one line where it has not, and by the
roofline, which has no FP4 model."""

from __future__ import annotations

import pytest

from harness.core.config import ConfigError, RunConfig
from harness.sim.engine_spec import resolve_engine
from harness.sim.kernels import source
from harness.sim.kernels.estimator import KernelError
from harness.studies.validate.gpu.silicon.rows import model_ref


def llama(gpu: str, precision: str) -> object:
    ref = model_ref("meta-llama/Llama-3.1-70B")[0]
    assert ref is not None
    return resolve_engine(ref, gpu, "vllm", 2, 1, precision, "bf16", 1)


def test_fp4_asks_the_estimator_for_nvfp4_and_holds_nine_sixteenths_of_a_byte() -> None:
    spec = llama("b200-sxm", "fp4")
    assert spec.estimator_kwargs()["gemm_quant_mode"] == "nvfp4"
    assert spec.bytes_per_weight == 9 / 16  # 4 bits, one FP8 scale per 16 weights
    fp8 = llama("b200-sxm", "fp8")
    assert spec.weight_bytes_per_gpu() == pytest.approx(fp8.weight_bytes_per_gpu() * 9 / 16)
    moe = resolve_engine(model_ref("MiniMaxAI/MiniMax-M2.5")[0], "b200-sxm", "vllm", 4, 1,
                         "fp4", "bf16", 1)
    kwargs = moe.estimator_kwargs()
    assert (kwargs["gemm_quant_mode"], kwargs["moe_quant_mode"]) == ("nvfp4", "nvfp4")


def test_fp4_on_b200_steps_faster_than_fp8_at_small_batch() -> None:
    """Half the weight bytes: at batch 8 the bandwidth-bound step is quicker (the database:
    8.6 against 11.0 ms a step, TP 2, 1k context)."""
    fp4, fp8 = (source.step_table(llama("b200-sxm", p)) for p in ("fp4", "fp8"))
    assert fp4.decode_ms(8, 1024) < 0.9 * fp8.decode_ms(8, 1024)


def test_fp4_where_the_database_has_no_nvfp4_is_one_line() -> None:
    with pytest.raises(KernelError) as err:
        source.step_table(llama("h100-sxm", "fp4"))
    said = str(err.value)
    assert "\n" not in said
    assert said == ("sim.rollout_precision: fp4: h100-sxm has no measured NVFP4 GEMMs (vllm); "
                    "b200_sxm and 4 more do")
    assert len(said) <= 100


def test_where_names_the_gpus_that_fit_and_counts_the_rest() -> None:
    gpus = ["b200_sxm", "b300_sxm", "rtx_pro_6000_server"]
    assert source._where(gpus, 100) == "b200_sxm, b300_sxm, rtx_pro_6000_server do"
    assert source._where(gpus, 32) == "b200_sxm, b300_sxm and 1 more do"
    assert source._where(gpus, 26) == "b200_sxm and 2 more do"
    assert source._where(gpus[:1], 5) == "b200_sxm does"
    assert source._where([], 50) == "no GPU has them"


def test_the_roofline_refuses_fp4_and_the_kv_cache_cannot_be_fp4() -> None:
    cfg = RunConfig()
    sim = cfg.sim
    sim.model, sim.rollout_gpu, sim.rollout_tp = "qwen3-8b", "b200-sxm", 2
    sim.rollout_precision, sim.step_model = "fp4", "roofline"
    cfg.validate()
    with pytest.raises(ConfigError, match=r"^sim.rollout_precision: fp4 \(NVFP4\) is priced by "
                                          r"the measured kernels only \(roofline would"):
        source.decode_model(sim, {"bw_eff": 1.0, "step_overhead_s": 0.0,
                                  "compute_eff": 1.0}, 2)
    sim.rollout_kv_dtype = "fp4"
    with pytest.raises(ConfigError, match="rollout_kv_dtype.*must be bf16 or fp8, not 'fp4'"):
        cfg.validate()


def test_steps_takes_fp4_and_refuses_it_in_one_line_off_blackwell() -> None:
    from typer.testing import CliRunner

    from harness.cli.app import app

    args = ["steps", "--model", "qwen3-8b", "--tp", "2", "--precision", "fp4", "--batch", "8",
            "--context", "1024"]
    ok = CliRunner().invoke(app, [*args, "--gpu", "b200-sxm"])
    assert ok.exit_code == 0 and "kernels:b200_sxm" in ok.output
    bad = CliRunner().invoke(app, [*args, "--gpu", "h100-sxm"])
    assert bad.exit_code == 2
    assert bad.output.strip().splitlines()[-1].startswith(
        "error: --precision: fp4: h100-sxm has no measured NVFP4 GEMMs (sglang); b200_sxm")
    assert max(map(len, bad.output.splitlines())) <= 100
