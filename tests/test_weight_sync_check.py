"""The weight-sync check against verl's published sync times: parameter totals from
config.json and the predicted seconds, each worked out by hand."""

from __future__ import annotations

import pytest

from harness.studies.validate import weight_sync as ws

SMALL_MOE = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
             "hidden_size": 8, "num_hidden_layers": 2,
             "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4,
             "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 6,
             "intermediate_size": 12, "vocab_size": 10,
             "tie_word_embeddings": False, "attention_bias": False}
SMALL_DENSE = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
               "hidden_size": 4, "num_hidden_layers": 1,
               "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 5,
               "vocab_size": 3, "tie_word_embeddings": True}


def test_total_params_of_a_small_moe_config() -> None:
    # Per layer: q 8x(2x4) = 64, k and v 2 x 8x(1x4) = 64, o (2x4)x8 = 64, q/k norms 2 x 4
    # = 8: attention 200. Experts 4 x 3 x 8 x 6 = 576, router 8 x 4 = 32: 608. Norms 16.
    # Layer 824, two layers 1,648; embedding and LM head 2 x 10 x 8 = 160; final norm 8.
    assert ws.total_params(SMALL_MOE) == 1_816
    # Tensors per layer: q, k, v, o, q_norm, k_norm, 2 norms, router, 4 x 3 experts = 21;
    # 42, plus embedding, final norm and the untied LM head: 45.
    assert ws.tensors(SMALL_MOE) == 45


def test_total_params_of_a_small_dense_config() -> None:
    # head_dim absent: 4 / 2 = 2. q 4x4 = 16, k and v 2 x 4x2 = 16, o 16, Qwen2's q/k/v
    # biases (2 + 2 x 1) x 2 = 8: 56. MLP 3 x 4 x 5 = 60. Norms 8. Layer 124. Tied
    # embedding 3 x 4 = 12, final norm 4: 140.
    assert ws.total_params(SMALL_DENSE) == 140
    # q, k, v, o, 3 biases, 2 norms, gate, up, down = 12; embedding and final norm: 14.
    assert ws.tensors(SMALL_DENSE) == 14


def test_the_three_models_match_their_published_totals() -> None:
    moe30 = ws.total_params(ws.read_config("Qwen--Qwen3-30B-A3B"))
    # 48 x (18,874,368 attention + 256 norms + 603,979,776 experts + 262,144 router + 4,096)
    # = 29,909,790,720; + 2 x 151,936 x 2,048 + 2,048.
    assert moe30 == 30_532_122_624
    moe235 = ws.total_params(ws.read_config("Qwen--Qwen3-235B-A22B"))
    # 94 x (71,303,168 + 256 + 2,415,919,104 + 524,288 + 8,192) + 2 x 151,936 x 4,096 + 4,096.
    assert moe235 == 235_093_634_560
    dense7 = ws.total_params(ws.read_config(""))
    assert dense7 == 7_615_616_512  # Qwen2.5-7B's model card: 7.61B
    for total, card in ((moe30, 30.5e9), (moe235, 235e9), (dense7, 7.6e9)):
        assert abs(total / card - 1) < 0.003


def test_predicted_seconds_by_hand() -> None:
    # 4 + 4 ranks fit one 8-GPU node: NVLink, the h20 preset's 450 GB/s.
    # 2 B x 7,615,616,512 / 450e9 B/s = 0.033847184...
    assert ws.predict(7_615_616_512, 4, 4) == pytest.approx(0.0338471845, rel=1e-9)
    # 16 + 16 ranks span nodes: 25 GB/s. 2 x 30,532,122,624 / 25e9 = 2.44256980992.
    assert ws.predict(30_532_122_624, 16, 16) == pytest.approx(2.44256980992, rel=1e-12)
    assert ws.link_gbs(4, 5) == (25.0, "across nodes")
    assert ws.link_gbs(4, 4) == (450.0, "NVLink")


def test_rows_take_the_total_as_an_argument() -> None:
    rows = {r["model"]: r for r in ws.rows({"Qwen3-30B-A3B": 30.5e9})}
    moe = rows["Qwen3-30B-A3B"]
    # 2 x 30.5e9 / 25e9 = 2.44 s against 15.76 s plain and 4.38 s with checkpoint-engine.
    assert moe["bytes_s"] == pytest.approx(2.44)
    assert moe["bytes_over_plain"] == pytest.approx(2.44 / 15.76)
    assert moe["bytes_over_engine"] == pytest.approx(2.44 / 4.38)
    # (15.76 - 2.44) s over 18,867 tensors (48 x (4 + 2 + 2 + 1 + 384) + 3) = 0.70600 ms.
    assert moe["tensors"] == 18_867
    assert moe["plain_ms_per_tensor"] == pytest.approx(13.32 / 18_867 * 1e3)
    # What a run charges today: rolloutpipe's flat 2.0 s, whatever the model.
    small = rows["Qwen2.5-Math-7B"]
    assert small["flat_s"] == 2.0 and small["flat_over_plain"] == pytest.approx(2.0 / 0.12)


def test_report_cites_the_source_and_lists_every_row() -> None:
    text = ws.report()
    assert "verl-project/verl@1dda039b9c6311889a9c9a26040677e1254814f9:" in text
    assert "fully_async_policy/README.md:452-462" in text
    assert "| Qwen3-30B-A3B | 30.53 | 16+16 | across nodes | 15.76 | 4.38 | 2.443 | 0.15 | 0.56 |" \
        in text
    assert all(len(line) <= 100 for line in text.splitlines())
