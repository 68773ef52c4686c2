"""The GPU timing script (run here on the CPU at a tiny size) and the comparison of its
committed H100/H200 timings with the database and both step models."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from harness.sim.presets import load_model
from harness.studies.validate.gpu import appendix_a, timed, timed_report
from harness.studies.validate.gpu.on_gpu import measure
from harness.studies.validate.gpu.on_gpu.decoder import Decoder, decode_attention, gemms

ROOT = Path(__file__).resolve().parents[1] / "measurements"
TINY = dataclasses.replace(load_model("qwen3-1.7b"), layers=2, hidden=64, heads=4, kv_heads=2,
                           head_dim=16, intermediate=96, vocab=50)


def test_decode_attention_equals_repeating_kv_per_query_head() -> None:
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(2, 6, 8, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(2, 3, 11, 8, generator=gen, dtype=torch.float64) for _ in range(2))
    ref = F.scaled_dot_product_attention(q[:, :, None], k.repeat_interleave(2, dim=1),
                                         v.repeat_interleave(2, dim=1))[:, :, 0]
    assert torch.allclose(decode_attention(q, k, v), ref, atol=1e-12)


def test_a_one_token_decode_is_that_tokens_prefill() -> None:
    """Two code paths, one function: at position 0 the cache holds only the token itself."""
    model = Decoder(TINY, "cpu", dtype=torch.float64, seed=5)
    for token in range(0, TINY.vocab, 7):
        tokens = torch.tensor([token])
        cache = [(torch.full((1, 2, 1, 16), float("nan"), dtype=torch.float64),
                  torch.full((1, 2, 1, 16), float("nan"), dtype=torch.float64))
                 for _ in range(TINY.layers)]
        assert model.decode(tokens, 0, cache).item() == model.prefill(tokens).item()
        assert all(not k.isnan().any() for k, _ in cache)  # the step wrote its own K and V


def test_the_gemm_shapes_follow_the_config() -> None:
    d = measure.dims_of("qwen3-8b")
    assert gemms(d) == {"qkv": (4096, 6144), "o": (4096, 4096), "gate_up": (4096, 24576),
                         "down": (12288, 4096), "lm_head": (4096, 151936)}


def test_the_quick_measurement_writes_every_kind_and_its_provenance(tmp_path: Path) -> None:
    assert measure.main(["--out", str(tmp_path), "--quick"]) == 0
    rows = pd.read_csv(tmp_path / "measure.csv")
    assert set(rows["kind"]) == {"gemm", "decode", "prefill", "attention"}
    assert rows["ms"].notna().all() and (rows["ms"] > 0).all()
    assert (rows["ms_p10"] <= rows["ms"]).all() and (rows["ms"] <= rows["ms_p90"]).all()
    info = json.loads((tmp_path / "provenance.json").read_text())
    assert info["device"] == "cpu" and info["quick"] is True
    assert max(info["check_rel_error"].values()) < 1e-2


def _run(folder: Path, rows: list[dict]) -> None:
    folder.mkdir(parents=True)
    pd.DataFrame(rows, columns=measure.FIELDS).to_csv(folder / "measure.csv", index=False)
    (folder / "provenance.json").write_text(json.dumps({"gpu": "X", "torch": "t"}))


def test_runs_pool_to_their_median_and_spread(tmp_path: Path) -> None:
    point = {"kind": "decode", "model": "qwen3-8b", "batch": 4, "context": 512}
    _run(tmp_path / "h100-sxm" / "run1", [{**point, "ms": 1.0}])
    _run(tmp_path / "h100-sxm" / "run2", [{**point, "ms": 1.2}])
    _run(tmp_path / "h100-sxm" / "run3", [{**point, "ms": 1.1}])
    _run(tmp_path / "not-a-gpu" / "run1", [{**point, "ms": 9.0}])
    raw, prov = timed.load(tmp_path)
    assert sorted(p["run"] for p in prov) == ["run1", "run2", "run3"]
    assert {p["preset"] for p in prov} == {"h100-sxm"}
    row = timed.pooled(raw).iloc[0]
    assert row["ms"] == pytest.approx(1.1) and row["runs"] == 3
    assert row["spread"] == pytest.approx(0.2 / 1.1)


def test_nothing_timed_is_one_line(tmp_path: Path) -> None:
    text = timed_report.report(tmp_path / "out", root=tmp_path / "none")
    assert text.startswith("No GPU timings under") and text.count("\n") == 1


@pytest.fixture(scope="module")
def h100() -> pd.DataFrame:
    raw, _ = timed.load(ROOT)
    points = timed.pooled(raw)
    return points[points["gpu"] == "h100-sxm"]


def test_the_committed_timings_are_two_runs_on_each_gpu(h100: pd.DataFrame) -> None:
    _, prov = timed.load(ROOT)
    assert sorted((p["preset"], p["run"]) for p in prov) == [
        ("h100-sxm", "compiled"), ("h100-sxm", "run1"), ("h100-sxm", "run2"),
        ("h200-sxm", "run1"), ("h200-sxm", "run2")]
    assert (h100.loc[h100["kind"] != "decode_compiled", "runs"] == 2).all()
    assert set(h100.loc[h100["kind"] == "decode_compiled", "batch"]) == {1, 4, 16, 64, 128}


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")
def test_a_compiled_layer_computes_what_the_eager_one_does() -> None:
    model = Decoder(TINY, "cpu", dtype=torch.float32, seed=2)
    gen = torch.Generator().manual_seed(4)
    tokens = torch.randint(0, TINY.vocab, (3,), generator=gen)
    cache = [tuple(torch.randn(3, 2, 9, 16, generator=gen) for _ in range(2))
             for _ in range(TINY.layers)]
    eager = model.decode(tokens, 8, [(k.clone(), v.clone()) for k, v in cache])
    model.compile_layers()
    assert torch.equal(model.decode(tokens, 8, [(k.clone(), v.clone()) for k, v in cache]),
                       eager)


def test_a_decode_step_splits_into_gemms_attention_and_the_rest(h100: pd.DataFrame) -> None:
    one = h100[(h100["model"] == "qwen3-1.7b") & (h100["kind"] != "prefill")
               & ((h100["batch"] == 16) | (h100["m"] == 16))
               & ((h100["context"] == 2048) | (h100["kind"] == "gemm"))]
    rows = timed.decode_rows(one)
    assert len(rows) == 1
    r = rows.iloc[0]
    gemm = one[one["kind"] == "gemm"].set_index("name")["ms"]
    by_hand = 28 * (gemm["qkv"] + gemm["o"] + gemm["gate_up"] + gemm["down"]) + gemm["lm_head"]
    assert r["gemm_ms"] == pytest.approx(by_hand)
    assert load_model("qwen3-1.7b").layers == 28
    att = one[one["kind"] == "attention"]["ms"].item()
    step = one[one["kind"] == "decode"]["ms"].item()
    assert r["other_ms"] == pytest.approx(step - by_hand - att)
    assert r["db_ms"] == pytest.approx(r["db_gemm_ms"] + r["db_attention_ms"] + r["db_other_ms"])
    assert 0 < r["kernels_vllm_ms"] and 0 < r["roofline_ms"]
    compiled = one[one["kind"] == "decode_compiled"]["ms"].item()
    assert r["compiled_ms"] == pytest.approx(compiled) and compiled < step


def test_appendix_u_of_a_timed_product_by_hand(h100: pd.DataFrame) -> None:
    rows = timed.appendix_rows(h100)
    ms = h100[(h100["model"] == "appendix_a") & (h100["k"] == 128)]["ms"].item()
    u = rows.set_index("h").loc[128, "measured_u"]
    assert u == pytest.approx(2 * 4096 * 16384 * 128 / (ms * 1e-3 * 989.4e12))
    optimum = timed.appendix_optimum(h100).iloc[0]
    util = appendix_a.interpolated(rows["h"].to_numpy(float),
                                   2 * 4096 * 16384 * rows["h"].to_numpy(float)
                                   / (rows["measured_u"].to_numpy() * 989.4e12))
    assert util(float(optimum["H"])) == pytest.approx(optimum["U_H"])


def test_a_folder_of_timings_elsewhere_is_read(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "h200-sxm" / "run1", tmp_path / "h200-sxm" / "run1")
    raw, prov = timed.load(tmp_path)
    assert len(prov) == 1 and set(raw["gpu"]) == {"h200-sxm"}
