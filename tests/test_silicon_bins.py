"""The silicon comparison's bins and keeper on hand-made rows: each row lands in the bin
worked by hand, a bin's median is the hand value, a bin of >= 50 rows is judged against the
15% target, and a setting the simulator lacks refuses the row, counted under its reason."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from harness.studies.validate.gpu.silicon import bins, prediction, report, rows


def _frame(errs: list[float], load: float = 100.0, **cols: object) -> pd.DataFrame:
    """Rows with the columns per_bin reads; every reading's error is `errs`."""
    n = len(errs)
    base = {"prefill_tok_per_step": [load] * n, "batch": [16] * n, "tp": [2] * n,
            "ep": [1] * n, "attention_dp": [1] * n, "framework": ["vllm"] * n,
            "gpu": ["h100-sxm"] * n, "precision": ["bf16"] * n, "arch": ["dense"] * n,
            "kernels_tpot_err": errs, "kernels_err": errs, "kernels_ttft_err": errs}
    base.update({k: [v] * n for k, v in cols.items()})
    return pd.DataFrame(base)


@pytest.mark.parametrize(("tokens", "label"), [
    (0.5, "<=40"), (40, "<=40"), (40.01, "41-256"), (256, "41-256"), (256.5, "257-1024"),
    (1024, "257-1024"), (1025, "1025-4096"), (4096, "1025-4096"), (4096.5, ">4096")])
def test_load_bin_edges(tokens: float, label: str) -> None:
    assert bins.load_bin(tokens) == label


def test_rows_land_in_their_bins() -> None:
    """batch 8 x isl 1024 / osl 128 = 64 prompt tokens per step: 41-256; batch 128 x 4096
    / 128 = 4096: 1025-4096; batch 1 x 1024 / 1024 = 1: <=40."""
    df = pd.concat([_frame([0.1], load=8 * 1024 / 128, batch=8, tp=8, ep=8),
                    _frame([0.2], load=128 * 4096 / 128, batch=128, tp=8, attention_dp=8,
                           framework="sglang", arch="moe", precision="fp8"),
                    _frame([0.3], load=1 * 1024 / 1024, batch=1, tp=1)], ignore_index=True)
    table = bins.per_bin(df).set_index(["by", "bin"])
    expect = {("load", "41-256"): 0.1, ("load", "1025-4096"): 0.2,
              ("load", "<=40"): 0.3, ("batch", "5-16"): 0.1, ("batch", "65-256"): 0.2,
              ("batch", "1"): 0.3, ("layout", "TP8 EP8"): 0.1, ("layout", "TP8 DP8"): 0.2,
              ("layout", "TP1"): 0.3, ("backend", "sglang"): 0.2, ("model", "moe"): 0.2,
              ("precision", "fp8"): 0.2}
    for key, err in expect.items():
        assert table.loc[key, "n"] == 1 and table.loc[key, "tpot_med"] == pytest.approx(err)
    assert table.loc[("backend", "vllm"), "n"] == 2
    assert table.loc[("GPU", "h100-sxm"), "n"] == 3


def test_bin_median_worst_and_signed_by_hand() -> None:
    """|errors| 0.1, 0.4, 0.2, 0.3 -> median 0.25, worst 0.4; signed -0.1, -0.4, 0.2, 0.3
    -> median (-0.1 + 0.2) / 2 = 0.05."""
    table = bins.per_bin(_frame([-0.1, -0.4, 0.2, 0.3])).set_index(["by", "bin"])
    row = table.loc[("load", "41-256")]
    for reading in ("tpot", "decode", "ttft"):
        assert row[f"{reading}_med"] == pytest.approx(0.25)
        assert row[f"{reading}_worst"] == pytest.approx(0.4)
        assert row[f"{reading}_signed"] == pytest.approx(0.05)
    assert row["tpot_verdict"] == "n<50"  # four rows: listed, not judged


def test_verdict_against_the_target() -> None:
    """50 rows at 14.9% meet; 50 at 15.1% miss; 49 at 1% are not judged."""
    df = pd.concat([_frame([0.149] * 50, batch=8), _frame([-0.151] * 50, batch=32),
                    _frame([0.01] * 49, batch=128)], ignore_index=True)
    table = bins.per_bin(df).set_index(["by", "bin"])
    assert table.loc[("batch", "5-16"), "tpot_verdict"] == "meets"
    assert table.loc[("batch", "17-64"), "tpot_verdict"] == "misses"
    assert table.loc[("batch", "65-256"), "ttft_verdict"] == "n<50"
    assert bins.verdict(50, 0.15) == "meets" and bins.verdict(50, 0.1501) == "misses"
    text = report.bin_tables(df)
    headline = text.split("Every bin")[0]
    assert "| batch | 5-16 | 50 | 14.9% | meets | 14.9% | meets |" in headline
    assert "| batch | 17-64 | 50 | 15.1% | misses | 15.1% | misses |" in headline
    assert "65-256" not in headline and "| batch | 65-256 | 49 | 1.0 / 1.0 / +1.0 |" in text
    # Judged: the one load, layout, parallel, backend, GPU, precision and model bin (149
    # rows, median 0.149: meets) and two batch bins: 8 of 9 meet.
    assert "TPOT 8 of 9, TTFT 8 of 9" in text


def test_expert_and_attention_dp_layouts_are_judged_pooled() -> None:
    """20 rows TP8 EP8 (+10%), 20 TP8 DP8 (-20%), 10 TP4 EP4 DP2 (+30%): each layout bin
    under 50 rows, not judged; pooled 50 rows, |errors| median 0.2 (signed +0.1): judged,
    and over the 15% target."""
    df = pd.concat([_frame([0.1] * 20, tp=8, ep=8), _frame([-0.2] * 20, tp=8, attention_dp=8),
                    _frame([0.3] * 10, tp=4, ep=4, attention_dp=2),
                    _frame([0.5] * 3, tp=2)], ignore_index=True)
    table = bins.per_bin(df).set_index(["by", "bin"])
    pooled = table.loc[("parallel", "EP or DP")]
    assert pooled["n"] == 50 and pooled["tpot_med"] == pytest.approx(0.2)
    assert pooled["tpot_signed"] == pytest.approx(0.1) and pooled["tpot_verdict"] == "misses"
    assert table.loc[("parallel", "TP only"), "n"] == 3
    assert table.loc[("layout", "TP8 EP8"), "tpot_verdict"] == "n<50"


def test_the_overheads_fit_rows_are_in_no_bin() -> None:
    """Two fit rows at +90% and three others at +10%: every bin holds the three alone."""
    df = pd.concat([_frame([0.9, 0.9], overhead_fit=True), _frame([0.1] * 3, overhead_fit=False)],
                   ignore_index=True)
    table = bins.per_bin(df)
    assert (table["n"] == 3).all() and table["tpot_med"].tolist() == pytest.approx(
        [0.1] * len(table))
    assert "The 2 rows the per-step overhead was fitted on" in report.bin_tables(df)


def _row(**cols: object) -> SimpleNamespace:
    base = {"id": "r", "backend": "sglang", "system": "h100_sxm", "model_path": "Qwen/Qwen3-32B",
            "precision": "bf16", "gemm_quant_mode": None, "moe_quant_mode": None,
            "mode": "agg", "backend_version": "0.5.1", "tp_size": 8.0, "moe_ep_size": 8.0,
            "attention_dp_size": float("nan"), "moe_tp_size": 1.0, "batch_size": 16.0,
            "isl": 1024, "osl": 128,
            "silicon_tpot_ms": 10.0, "silicon_ttft_ms": 100.0}
    base.update(cols)
    return SimpleNamespace(**base)


def test_keeper_passes_layout_and_precision_as_settings() -> None:
    kept, why = rows.keep(_row(precision="fp8", gemm_quant_mode="fp8_block"))
    assert why == "" and kept is not None
    assert (kept["precision"], kept["precision_basis"], kept["arch"]) == ("fp8", "labelled",
                                                                          "dense")
    assert (kept["tp"], kept["ep"], kept["attention_dp"]) == (8, 8, 1)  # NaN DP: not used
    assert rows.keep(_row(precision="fp4", gemm_quant_mode="nvfp4"))[0]["precision"] == "fp4"


def test_keeper_skips_a_moe_layout_that_does_not_add_up() -> None:
    """A MoE row's experts span the attention's GPUs: moe_tp x moe_ep = tp x attention DP
    (2 x 4 = 2 x 4 kept; 2 x 1 != 1 x 1 skipped); a dense row's MoE columns are not read."""
    moe = {"model_path": "Qwen/Qwen3-235B-A22B-FP8", "precision": "fp8"}
    kept, why = rows.keep(_row(**moe, tp_size=2.0, moe_tp_size=2.0, moe_ep_size=4.0,
                               attention_dp_size=4.0))
    assert why == "" and (kept["arch"], kept["tp"], kept["ep"], kept["attention_dp"]) == (
        "moe", 2, 4, 4)
    assert rows.keep(_row(**moe, tp_size=1.0, moe_tp_size=2.0, moe_ep_size=1.0)) == (
        None, "layout: moe_tp x moe_ep != tp x attention_dp")
    assert rows.keep(_row(tp_size=1.0, moe_tp_size=2.0))[1] == ""  # dense: not read


def test_keeper_refusal_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A setting the simulator has no field for refuses the row (unless the row leaves it
    at its unset value), and predict counts the row under that refusal."""
    monkeypatch.setitem(rows.SIM_FIELDS, "ep", ("rollout_no_such_field", 1))
    kept, _ = rows.keep(_row())
    assert rows.engine_sim(kept, "kernels")[1] == "no sim.rollout_no_such_field (ep 8)"
    assert rows.engine_sim(rows.keep(_row(moe_ep_size=1.0))[0], "roofline")[1] == ""
    raw = pd.DataFrame([vars(_row(id="a")), vars(_row(id="b", system="gb300"))])
    df = prediction.predict(raw)
    assert len(df) == 0
    assert df.attrs["skipped"] == {"no sim.rollout_no_such_field (ep 8)": 1,
                                   "GPU gb300 without a preset": 1}
