"""The trainer check's arithmetic on the committed H100 Megatron measurements, against values
worked out by hand from the CSV rows and the models' shapes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from harness.studies.validate.gpu import trainer_check as tc

ROOT = Path(__file__).resolve().parents[1] / "measurements" / "h100-sxm" / "trainer"


@pytest.fixture(scope="module")
def data() -> tuple[pd.DataFrame, dict]:
    raw, info = tc.load(ROOT)
    assert not raw.empty, "the committed trainer measurements are missing"
    return raw, info


def test_parameter_counts(data: tuple[pd.DataFrame, dict]) -> None:
    shapes = tc.shapes(data[1])
    dense = tc.counts(shapes["qwen3-1.7b"])
    # Tied embedding: every counted parameter is in a product (the head), as the preset's
    # params_b = 1.721 (B) counts.
    assert dense["total"] == dense["rule"] == dense["matmul"] == 1_720_574_976
    moe = tc.counts(shapes["qwen3-30b-a3b"])
    # 3 layers x 120 unchosen experts x (3 x 2048 x 768) = 1,698,693,120 left out;
    # the untied input embedding 151936 x 2048 = 311,164,928 is no product.
    assert moe["total"] == 2_491_693_824
    assert moe["rule"] == 2_491_693_824 - 1_698_693_120 == 793_000_704
    assert moe["matmul"] == 793_000_704 - 311_164_928 == 481_835_776


def test_mfu_of_one_row(data: tuple[pd.DataFrame, dict]) -> None:
    table = tc.mfu_rows(*data)
    row = table[(table["run"] == "run3") & (table["model"] == "qwen3-1.7b")
                & (table["kind"] == "train_fwdbwd") & (table["batch"] == 2)
                & (table["seq"] == 4096)].iloc[0]
    assert row["ms"] == pytest.approx(338.1309356689453)
    # By hand: 6 N T = 6 x 1,720,574,976 x 8192 = 84,569,701,220,352; attention forward
    # 4 x 28 x 16 x 128 / 2 x 4096^2 x 2 sequences = 3,848,290,697,216, times 3 for
    # forward and backward = 11,544,872,091,648; total 96,114,573,312,000 FLOPs over
    # 0.33813 s x 989.4e12 FLOP/s = 0.28730.
    assert row["mfu"] == pytest.approx(0.28730, abs=5e-5)
    assert row["ms_per_1k_tokens"] == pytest.approx(338.1309356689453 / 8.192)


def test_implied_train_mfu_uses_the_8n_rule(data: tuple[pd.DataFrame, dict]) -> None:
    table = tc.mfu_rows(*data)
    med = tc.implied_train_mfu(table, data[1]).set_index(["model", "batch", "seq"])
    row = med.loc[("qwen3-1.7b", 2, 4096)]
    # 8 N T + 4 x attention = 4/3 of the fwd+bwd FLOPs above = 128,152,764,416,000.
    assert row["sim_flops"] == pytest.approx(128_152_764_416_000)
    assert row["implied_train_mfu"] == pytest.approx(
        128_152_764_416_000 / ((row["train_fwdbwd"] + row["forward"]) * 1e-3 * 989.4e12))
    fitted = tc.fit(med.reset_index()).set_index("model")
    assert fitted.loc["qwen3-1.7b", "points"] == 5


def test_optimizer_against_the_model(data: tuple[pd.DataFrame, dict]) -> None:
    opt = tc.optimizer_rows(*data).set_index("model")
    # 16 bytes x 1,720,574,976 / 3350 GB/s = 8.2177 ms.
    assert opt.loc["qwen3-1.7b", "model_ms"] == pytest.approx(8.2177, abs=1e-4)
    assert opt.loc["qwen3-1.7b", "measured_over_model"] == pytest.approx(
        opt.loc["qwen3-1.7b", "ms"] / 8.21767, rel=1e-4)


def test_grouped_experts_against_the_database(data: tuple[pd.DataFrame, dict]) -> None:
    rows = tc.experts_rows(data[0])
    assert "grouped_fwdbwd" not in set(rows["name"])  # the table is forward only
    row = rows[(rows["name"] == "grouped") & (rows["tokens"] == 4096)
               & (rows["backend"] == "vllm 0.24.0")].iloc[0]
    # The database's row (h100_sxm, vllm 0.24.0, bf16, balanced, TP 1, EP 1, 2048/768/128/8)
    # reads 0.8362 ms; the three runs' medians are 1.5518, 1.5512 and 1.5605 ms.
    assert row["db_ms"] == pytest.approx(0.8362027, rel=1e-6)
    assert row["ms"] == pytest.approx(1.5518080, rel=1e-6) and row["runs"] == 3
    assert row["measured_over_db"] == pytest.approx(1.5518080 / 0.8362027, rel=1e-6)
