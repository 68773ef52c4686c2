"""The transfer model (harness/sim/weight_sync.py) on tiny examples worked by hand, and the
tensor counts it reads from config.json."""

from __future__ import annotations

import json

import pytest

from harness.sim import weight_sync as ws
from harness.sim.presets import shipped_config

K = ws.Constants(c_expert=0.001, c_tensor=0.002, c_bucket=0.05, fan_per_doubling=1.0,
                 eff_nccl=0.5, eff_ipc=0.25, eff_ckpt=0.5)
GIB = 1 << 30
SMALL_MOE = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
             "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
             "num_key_value_heads": 1, "head_dim": 4, "num_experts": 4,
             "num_experts_per_tok": 2, "moe_intermediate_size": 6, "intermediate_size": 12,
             "vocab_size": 10, "tie_word_embeddings": False, "attention_bias": False}
SMALL_DENSE = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
               "hidden_size": 4, "num_hidden_layers": 1, "num_attention_heads": 2,
               "num_key_value_heads": 1, "intermediate_size": 5, "vocab_size": 3,
               "tie_word_embeddings": True}
SMALL_MLA = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
             "num_hidden_layers": 3, "kv_lora_rank": 4, "q_lora_rank": 4,
             "n_routed_experts": 4, "n_shared_experts": 1, "first_k_dense_replace": 1,
             "topk_method": "noaux_tc", "tie_word_embeddings": False}


def test_nccl_per_tensor_in_one_node() -> None:
    # 8 GPUs: one node, fan 1. 100 tensors x 2 ms = 0.2 s; 10 GB over half of the H100's
    # 450 GB/s NVLink = 10e9 / 225e9 = 0.0444... s; no gather on the NCCL path.
    t = ws.Transfer("nccl", 10e9, 100, "h100-sxm", 8, True, True, expert_tensors=60)
    assert ws.parts(t, K) == pytest.approx(
        {"gather": 0.0, "transfer": 0.2, "bytes": 10 / 225, "staging": 0.0})
    assert ws.seconds(t, K) == pytest.approx(0.2 + 10 / 225)


def test_nccl_buckets_across_nodes_grow_with_the_fleet() -> None:
    # 32 GPUs: 4 nodes, fan 1 + 1 x log2(4) = 3. 10e9 B in 1 GiB buckets: ceil(9.31) = 10,
    # x 50 ms x 3 = 1.5 s. Across nodes the link is min(450, 8 x 50 GB/s NICs) = 400 GB/s:
    # 10e9 / (0.5 x 400e9) = 0.05 s. Total 1.55 s.
    t = ws.Transfer("nccl", 10e9, 100, "h100-sxm", 32, True, False, GIB)
    assert t.nodes == 4 and t.buckets == 10
    assert ws.seconds(t, K) == pytest.approx(1.55)


def test_ipc_gathers_experts_and_does_not_fan_out() -> None:
    # Colocated, 60 expert tensors x 1 ms = 0.06 s, 10 buckets x 50 ms = 0.5 s, and 10e9 /
    # (0.25 x 450e9) = 0.0889 s in one node; on 4 nodes the fan stays 1 and the link is
    # 400 GB/s: 0.06 + 0.5 + 0.1 = 0.66 s.
    one = ws.Transfer("ipc", 10e9, 100, "h100-sxm", 8, True, False, GIB, expert_tensors=60)
    assert ws.seconds(one, K) == pytest.approx(0.56 + 10 / 112.5)
    four = ws.Transfer("ipc", 10e9, 100, "h100-sxm", 32, True, False, GIB, expert_tensors=60)
    assert ws.seconds(four, K) == pytest.approx(0.66)
    # bucketed gathers (no per-tensor gather): the expert term goes
    flat = ws.Transfer("ipc", 10e9, 100, "h100-sxm", 8, False, False, GIB, expert_tensors=60)
    assert ws.parts(flat, K)["gather"] == 0.0


def test_checkpoint_engine_stages_each_owners_share_through_host_memory() -> None:
    # 4 owners, out and back (2 passes) over PCIe Gen5 (63 GB/s): 2 x 10e9 / 4 / 63e9 =
    # 0.0794 s; 10 buckets x 50 ms; 10e9 / (0.5 x 450e9) = 0.0444 s. Total 0.6238 s.
    t = ws.Transfer("checkpoint-engine", 10e9, 100, "h100-sxm", 8, False, False, GIB,
                    owners=4, host_passes=2)
    assert ws.parts(t, K)["staging"] == pytest.approx(2 * 10e9 / 4 / 63e9)
    assert ws.seconds(t, K) == pytest.approx(2 * 10 / 4 / 63 + 0.5 + 10 / 225)


def test_a_gb200_rack_is_one_nvlink_domain() -> None:
    t = ws.Transfer("nccl", 1e9, 1, "gb200", 72)
    assert t.nodes == 1
    assert ws.Transfer("nccl", 1e9, 1, "h100-sxm", 72).nodes == 9


def test_tensor_counts_of_small_configs() -> None:
    # Qwen3 MoE layer: q, k, v, o, q/k norms, 2 norms, a router and 4 x 3 experts = 21;
    # 2 layers 42, + embedding, final norm, untied LM head = 45; experts 2 x 4 x 3 = 24.
    assert ws.tensor_count(SMALL_MOE) == 45 and ws.expert_tensor_count(SMALL_MOE) == 24
    # Qwen2 layer: q, k, v, o, 3 biases, 2 norms, gate, up, down = 12; tied: + 2 = 14.
    assert ws.tensor_count(SMALL_DENSE) == 14 and ws.expert_tensor_count(SMALL_DENSE) == 0
    # Latent attention: 7 tensors + 2 norms a layer = 27; 1 dense MLP 3; 2 MoE layers of
    # router + bias 2, 12 expert tensors, 3 shared = 34; + 3: 67. Experts 2 x 4 x 3 = 24.
    assert ws.tensor_count(SMALL_MLA) == 67 and ws.expert_tensor_count(SMALL_MLA) == 24


def test_tensor_counts_of_shipped_configs() -> None:
    moe = json.loads(shipped_config("Qwen--Qwen3-30B-A3B").read_text("utf-8"))
    # 48 x (4 + 2 + 2 + 1 + 384) + 3 = 18,867; experts 48 x 128 x 3 = 18,432
    assert ws.tensor_count(moe) == 18_867 and ws.expert_tensor_count(moe) == 18_432
    dsv3 = json.loads(shipped_config("deepseek-ai--DeepSeek-V3").read_text("utf-8"))
    # 61 x 9 + 3 x 3 + 58 x (2 + 768 + 3) + 3 = 45,395; experts 58 x 256 x 3 = 44,544
    assert ws.tensor_count(dsv3) == 45_395 and ws.expert_tensor_count(dsv3) == 44_544
    assert ws.model_transfer_facts("qwen3-1.7b") == (3.442e9, 310, 0)  # 28 x 11 + 2, tied


def test_predict_sync_s_for_verls_30b_run_by_hand() -> None:
    # 16 + 16 H20 = 4 nodes: fan 1 + 1.165 x 2 = 3.33; 18,867 tensors x 0.2642 ms x 3.33 =
    # 16.599 s; 61.064 GB over min(450, 400) GB/s = 0.153 s (NCCL eff 1.0)
    want = 18_867 * 2.642e-4 * 3.33 + 61.064e9 / 400e9
    got = ws.predict_sync_s("qwen3-30b-a3b", "h20", 16, 16, "nccl", per_tensor=True)
    assert got == pytest.approx(want, rel=1e-9)
    assert got == pytest.approx(16.75, abs=0.01)


def test_a_moe_preset_without_a_config_is_counted_from_its_sizes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.sim.presets import Model

    m = Model(name="x", params_b=10, layers=2, hidden=8, heads=2, kv_heads=1, head_dim=4,
              intermediate=8, vocab=10, tied_embeddings=False, source="a user's preset",
              experts=4, experts_per_token=2, expert_intermediate=4)
    monkeypatch.setattr(ws, "load_model", lambda name: m)
    # 2 x (q, k, v, o, 2 norms, router, 4 x 3 experts = 19) + embedding, norm, head = 41
    assert ws.model_transfer_facts("x") == (20e9, 41, 24)
