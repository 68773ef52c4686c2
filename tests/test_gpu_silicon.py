"""Step models against aiconfigurator-core's measured end-to-end TPOT (the silicon sample)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from harness.core.config import RunConfig
from harness.studies.steps import decode_model
from harness.studies.validate.gpu import silicon as si
from harness.studies.validate.gpu.silicon import rows


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[pd.DataFrame, Path]]:
    """One compare() over the shipped sample, with a fresh table cache."""
    out = tmp_path_factory.mktemp("silicon")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROLLOUTBENCH_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield si.compare(out), out


def test_writes_csv_and_figure(run: tuple[pd.DataFrame, Path]) -> None:
    df, out = run
    assert (out / "silicon.png").stat().st_size > 10_000
    assert (out / "silicon_bins.png").stat().st_size > 10_000
    back = pd.read_csv(out / "silicon.csv")
    assert len(back) == len(df) > 0
    assert {"model", "gpu", "framework", "tp", "batch", "isl", "osl", "kernels_ms",
            "roofline_ms", "kernels_err", "roofline_err", "kernels_source", "kernels_tpot_ms",
            "roofline_tpot_ms", "kernels_tpot_err", "roofline_tpot_err", "measured_ttft_ms",
            "kernels_ttft_ms", "kernels_ttft_err", "precision", "arch", "ep",
            "attention_dp"} <= set(back)


def test_used_rows_are_agg_priced_rows_on_mapped_gpus(run: tuple[pd.DataFrame, Path]) -> None:
    df, _ = run
    raw = pd.read_csv(si.package_dir() / si.SAMPLE_REL).set_index("id").loc[df["id"]]
    assert set(df["gpu"]) <= set(si.GPUS.values())
    assert set(df["framework"]) <= {"sglang", "vllm"}
    assert (raw["mode"] == "agg").all()
    assert set(df["precision"]) <= {"bf16", "fp8", "fp4"}  # what sim.rollout_precision takes
    for ref, arch in df[["model_ref", "arch"]].drop_duplicates().itertuples(index=False):
        cfg = json.loads(Path(ref).read_text("utf-8"))
        assert rows.checkpoint(cfg)[1] == arch
    quant = raw[["precision", "gemm_quant_mode", "moe_quant_mode"]]
    labelled = quant.notna().any(axis=1).to_numpy()
    assert (df["precision_basis"] == "labelled").to_numpy().tolist() == labelled.tolist()
    assert quant.stack().dropna().str.lower().isin(si.BF16 | rows.FP8 | {"fp4", "nvfp4"}).all()
    inferred = df[df["precision_basis"] == "inferred"]
    for ref, prec in inferred[["model_ref", "precision"]].drop_duplicates().itertuples(
            index=False):
        assert rows.checkpoint(json.loads(Path(ref).read_text("utf-8")))[0] == prec
    assert (df["kernels_source"].str.startswith("kernels:")).all()
    # the roofline has no attention-DP model and no FP4 one: it says so
    dp = (df["attention_dp"] > 1) | (df["precision"] == "fp4")
    assert (df.loc[~dp, "roofline_source"] == "roofline").all()
    assert df.loc[dp, "roofline_source"].str.contains("priced by the measured kernels").all()
    assert (df["precision"] == "fp4").sum() > 300  # NVFP4 rows on B200 and B300


def test_kernels_column_matches_a_direct_call(run: tuple[pd.DataFrame, Path]) -> None:
    df, _ = run
    row = df[(df["framework"] == "vllm") & (df["tp"] == 4) & (df["model"] == "Qwen/Qwen3-32B")
             & (df["precision"] == "bf16") & (df["gpu"] == "h100-sxm")].iloc[0]
    sim = RunConfig().sim
    sim.model = str(si.package_dir() / "model_configs" / "Qwen--Qwen3-32B_config.json")
    sim.rollout_gpu, sim.rollout_tp, sim.engine_backend = "h100-sxm", 4, "vllm"
    sim.step_model, sim.calibration = "kernels", "rolloutpipe"
    assert row["model"] == "Qwen/Qwen3-32B" and row["gpu"] == "h100-sxm"
    model, source = decode_model(sim)
    ctx = int(row["isl"]) + int(row["osl"]) // 2
    expect = 1e3 * model.steps_time(1, int(row["batch"]), int(row["batch"]) * ctx)
    assert row["kernels_ms"] == pytest.approx(expect, rel=1e-12)
    assert row["kernels_source"] == source
    sim.step_model = "roofline"
    roof, _ = decode_model(sim)
    assert row["roofline_ms"] == pytest.approx(
        1e3 * roof.steps_time(1, int(row["batch"]), int(row["batch"]) * ctx), rel=1e-12)
    assert row["roofline_ms"] != pytest.approx(row["kernels_ms"])


def test_tpot_by_hand(run: tuple[pd.DataFrame, Path]) -> None:
    """Decode step plus batch/osl prefills of isl tokens, from the models themselves."""
    df, _ = run
    row = df[(df["framework"] == "vllm") & (df["tp"] == 4) & (df["batch"] == 32)
             & (df["osl"] > df["batch"]) & (df["precision"] == "bf16")
             & (df["gpu"] == "h100-sxm")].iloc[0]
    b, isl, osl = int(row["batch"]), int(row["isl"]), int(row["osl"])
    sim = RunConfig().sim
    sim.model, sim.calibration = row["model_ref"], "rolloutpipe"
    sim.rollout_gpu, sim.rollout_tp, sim.engine_backend = "h100-sxm", 4, "vllm"
    for name in si.MODELS:
        sim.step_model = name
        model, _ = decode_model(sim)
        decode = 1e3 * model.steps_time(1, b, b * (isl + osl // 2))
        prefill = 1e3 * (model.prefill_fixed_s + model.prefill_per_token_s * isl
                         + model.prefill_per_token2_s * isl * isl + model.admit_per_request_s)
        assert prefill > 0.05 * decode
        assert row[f"{name}_ms"] == pytest.approx(decode, rel=1e-12)
        assert row[f"{name}_tpot_ms"] == pytest.approx(decode + b / osl * prefill, rel=1e-12)
        # Neither without the prefill share, nor with one prefill per osl steps.
        for wrong in (decode, decode + prefill / osl, decode + osl * prefill):
            assert row[f"{name}_tpot_ms"] != pytest.approx(wrong, rel=1e-3)
        tpot = row["measured_ms"]
        assert row[f"{name}_tpot_err"] == pytest.approx(
            (decode + b / osl * prefill - tpot) / tpot, rel=1e-9)


def test_ttft_by_hand(run: tuple[pd.DataFrame, Path]) -> None:
    """The mean over a wave of `batch` prompts of the k-th prompt's wait, k prefills."""
    df, _ = run
    row = df[(df["framework"] == "sglang") & (df["batch"] == 16) & (df["precision"] == "bf16")
             & (df["arch"] == "dense")].iloc[0]  # the settings a default sim has
    b, isl = int(row["batch"]), int(row["isl"])
    sim = RunConfig().sim
    sim.model, sim.calibration, sim.step_model = row["model_ref"], "rolloutpipe", "kernels"
    sim.rollout_gpu, sim.rollout_tp = row["gpu"], int(row["tp"])
    sim.engine_backend = row["framework"]
    model, _ = decode_model(sim)
    waits = [1e3 * (model.prefill_fixed_s + model.prefill_per_token_s * k * isl
                    + model.prefill_per_token2_s * k * isl * isl
                    + model.admit_per_request_s * k) for k in range(1, b + 1)]
    assert row["kernels_ttft_ms"] == pytest.approx(sum(waits) / b, rel=1e-12)
    assert row["kernels_ttft_ms"] > 2 * waits[0]  # not one prompt alone
    measured = pd.read_csv(si.package_dir() / si.SAMPLE_REL).set_index("id").loc[
        row["id"], "silicon_ttft_ms"]
    assert row["kernels_ttft_err"] == pytest.approx(
        (sum(waits) / b - measured) / measured, rel=1e-9)


def test_relative_errors_by_hand(run: tuple[pd.DataFrame, Path]) -> None:
    df, _ = run
    row = df.iloc[len(df) // 2]
    tpot = pd.read_csv(si.package_dir() / si.SAMPLE_REL).set_index("id").loc[
        row["id"], "silicon_tpot_ms"]
    assert row["measured_ms"] == tpot
    assert row["kernels_err"] == pytest.approx((row["kernels_ms"] - tpot) / tpot, rel=1e-12)
    assert row["roofline_err"] == pytest.approx((row["roofline_ms"] - tpot) / tpot, rel=1e-12)


def test_summary_mentions_the_counts(run: tuple[pd.DataFrame, Path]) -> None:
    df, _ = run
    text = si.summary(df)
    flat = " ".join(text.split())
    skipped = df.attrs["skipped"]
    assert f"{len(df)} rows used" in text
    assert f"Skipped {sum(skipped.values())} rows" in text
    assert len(df) + sum(skipped.values()) == len(pd.read_csv(si.package_dir() / si.SAMPLE_REL))
    for why, n in skipped.items():
        assert f"- {' '.join(why.split())}: {n}" in flat
    assert "| all | " in text and max(len(line) for line in text.splitlines()) <= 100
    for name in si.MODELS:
        assert f"{name} step model, |relative error|" in text
        assert f"{df[f'{name}_tpot_err'].abs().median():.1%} with the prefill" in flat
    assert "| by | bin | n | TPOT med | TPOT | TTFT med | TTFT |" in text


def test_summary_low_prompt_offset(run: tuple[pd.DataFrame, Path]) -> None:
    df, _ = run
    low = df[df["batch"] * df["isl"] / df["osl"] <= 40]
    assert 0 < len(low) < len(df)
    text = " ".join(si.summary(df).split())
    for fw, g in low.groupby("framework"):
        ms = float((g["measured_ms"] - g["kernels_tpot_ms"]).median())
        assert f"{fw} {ms:+.2f} ms (n={len(g)})" in text


def _sample(tmp_path: Path) -> Path:
    """One row of each kind the keeper must tell apart."""
    base = pd.read_csv(si.package_dir() / si.SAMPLE_REL)
    row = base[(base["model_path"] == "Qwen/Qwen3-32B") & (base["backend"] == "sglang")
               & (base["system"] == "h100_sxm") & base["precision"].isna()].iloc[[0]]
    rows = [row.assign(id="unlabelled"),
            row.assign(id="bf16", precision="bf16"),
            row.assign(id="fp4", precision="fp4", gemm_quant_mode="nvfp4"),
            row.assign(id="mixed", precision="fp8", gemm_quant_mode="fp8",
                       moe_quant_mode="nvfp4"),
            row.assign(id="trt", backend="trtllm"),
            row.assign(id="gb300", system="gb300"),
            row.assign(id="noconfig", model_path="nvidia/Qwen3-32B-NVFP4"),
            row.assign(id="disagg", mode="disagg", precision="bf16")]
    path = tmp_path / "sample.csv"
    pd.concat(rows).to_csv(path, index=False)
    return path


def test_filter_reasons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLOUTBENCH_CACHE", str(tmp_path / "cache"))
    sample = _sample(tmp_path)
    df = si.compare(tmp_path / "a", sample)
    assert sorted(df["id"]) == ["bf16", "unlabelled"]
    assert dict(zip(df["id"], df["precision_basis"], strict=True)) == {
        "bf16": "labelled", "unlabelled": "inferred"}
    skipped = dict(df.attrs["skipped"])
    # fp4 is a setting the simulator is asked for, and refuses (no NVFP4 kernels for the
    # GPU): counted under its refusal, which names the field and the value.
    refused = [why for why in skipped if "rollout_precision" in why]
    assert len(refused) == 1 and "fp4" in refused[0] and skipped.pop(refused[0]) == 1
    assert skipped == {"mixed precision fp4/fp8": 1,
                       "framework trtllm (the estimator prices sglang, vllm)": 1,
                       "GPU gb300 without a preset": 1, "no shipped config or preset": 1,
                       "serving mode disagg": 1}
    strict = si.compare(tmp_path / "b", sample, unlabelled_as_bf16=False)
    assert list(strict["id"]) == ["bf16"]
    assert strict.attrs["skipped"]["precision not labelled"] == 1
    assert "Too few rows (1 < 20)" in si.summary(strict)
