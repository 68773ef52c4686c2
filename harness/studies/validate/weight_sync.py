"""verl's published weight-synchronisation times on H20 against the simulator's weight sync.

Why: issue #27 asks that weight publication grow with a model's total parameters, and
verl's checkpoint-engine ablation is the one published set of sync times across a 30x
range of total parameters on one GPU type. This module reports how far the project's
weight-sync model lands from it; nothing here is fitted to those numbers.

Measured (verl-project/verl@1dda039b9c6311889a9c9a26040677e1254814f9,
verl/experimental/fully_async_policy/README.md:452-462, "checkpoint-engine Ablation
Experiment"): "the single-step parameter synchronization time ... All experiments were
performed on H20 machines, and the Megatron engine was used for training", as trainer
ranks, rollout ranks and "total sync time" without and with checkpoint-engine. The README
gives no TP/EP/PP and no precision (its 30B run script trains at TP 2, EP 8 and rolls out
at TP 4: .../shell/grpo_30b_a3b_base_math_megatron_96_32.sh:59-64; the rule below needs
only the rank counts). The rows were added with the code that timed them
(verl-project/verl@cdd7d874f4dc4c40bac4a6a41bfbef771d0397b8, recipe/fully_async_policy/):
`param_sync.py:97-121` times from pausing the rollouter to the last rollout worker's
return. Without checkpoint-engine (`megatron_worker.py:81-108`) every Hugging Face-named
tensor in turn is gathered on the trainer (pipeline broadcast, expert-parallel and
tensor-parallel all-gathers, `verl/utils/megatron_utils.py:983,1022`), broadcast by NCCL
from trainer rank 0 to every trainer and rollout rank, and loaded by vLLM's `load_weights`
one tensor at a time. With it (`megatron_worker.py:139-182`, default
`device_buffer_size_M: 4096`) each trainer rank copies its share of tensors to pinned CPU
memory, and the weights travel in 4 GiB buckets, each broadcast by its owner and loaded.

The project's weight-sync model (`harness/sim/weight_sync.py`): the calibration's
`weight_sync_s`, chosen for the model its `[hardware]` table names, scaled by the run's total
weight bytes over that model's (`scaled_sync_s`). Until #27 it was that time flat, the same
for every model (`flat_sync_s`); the report gives both. The calibrations write down how
they chose it: bf16 bytes over an effective link bandwidth, ~25 GB/s across nodes
(`harness/sim/calibration/pipelinerl.toml:16-17`). `predict` is that rule made explicit:
2 bytes x total parameters over the GPU preset's `link_bandwidth_gbs` (NVLink) when every
trainer and rollout rank sits in one node, else over 25 GB/s. It has no term per tensor,
per rank or per copy, and cannot tell the plain sync from checkpoint-engine.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from typing import Any

from harness.sim.calibration import load as load_calibration
from harness.sim.calibration import names as calibration_names
from harness.sim.model_config import count_params
from harness.sim.presets import load_hardware, load_model, shipped_config
from harness.sim.weight_sync import own_model, scale

SOURCE = ("verl-project/verl@1dda039b9c6311889a9c9a26040677e1254814f9:"
          "verl/experimental/fully_async_policy/README.md:452-462")
GPU = "h20"
GPUS_PER_NODE = 8  # H20 HGX nodes; verl's H20 scripts set NGPUS_PER_NODE=8
# (verl@1dda039 .../shell/grpo_30b_a3b_base_math_megatron_96_32.sh:100)
ACROSS_NODES_GBS = 25.0  # the calibrations' effective NCCL bandwidth across nodes
BYTES_PER_PARAM = 2  # bf16 weights, as the rollout engine holds them
CALIBRATION = "rolloutpipe"  # the default `sim.calibration`

# Qwen2.5-Math-7B's sizes: config.json of Qwen/Qwen2.5-Math-7B on the model's hub page
# (the architecture of Qwen2.5-7B: models.toml's qwen2.5-7b, 7.61B on its model card).
QWEN25_MATH_7B: dict[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584,
    "num_hidden_layers": 28,
    "num_attention_heads": 28, "num_key_value_heads": 4, "intermediate_size": 18944,
    "vocab_size": 152064, "tie_word_embeddings": False}


@dataclass(frozen=True)
class Measured:
    """One row of verl's table: its layout and the two sync times in seconds."""

    model: str
    config: str  # aiconfigurator_core/model_configs stem, or "" for QWEN25_MATH_7B
    published_b: float  # the total the model card states, billions
    trainer_ranks: int
    rollout_ranks: int
    plain_s: float
    engine_s: float


MEASURED = (
    Measured("Qwen2.5-Math-7B", "", 7.6, 4, 4, 0.12, 0.02),
    Measured("Qwen3-30B-A3B", "Qwen--Qwen3-30B-A3B", 30.5, 16, 16, 15.76, 4.38),
    Measured("Qwen3-235B-A22B", "Qwen--Qwen3-235B-A22B", 235.0, 64, 64, 58.57, 23.70),
)


def read_config(stem: str) -> dict[str, Any]:
    """A Hugging Face config.json shipped with aiconfigurator-core (a dependency)."""
    if not stem:
        return QWEN25_MATH_7B
    return dict(json.loads(shipped_config(stem).read_text("utf-8")))


def _qk_norm(cfg: dict[str, Any]) -> bool:
    """Qwen3 (dense and MoE) normalises q and k per head; Qwen2 does not."""
    return str(cfg.get("model_type", "")).startswith("qwen3")


def _qkv_bias(cfg: dict[str, Any]) -> bool:
    """Qwen2 has q, k, v biases without saying so in its config; Qwen3 says
    attention_bias."""
    return bool(cfg.get("attention_bias", cfg.get("model_type") == "qwen2"))


def total_params(cfg: dict[str, Any]) -> int:
    """Every parameter of a model from its config.json, every expert included: the count
    the simulator's presets use (`harness.sim.model_config.count_params`)."""
    return count_params(cfg)[0]


def tensors(cfg: dict[str, Any]) -> int:
    """Hugging Face-named tensors a per-tensor sync moves one at a time: per layer q, k, v,
    o (+ 3 biases, + 2 q/k norms), 2 norms, and gate, up, down (dense) or a router plus
    gate, up, down per expert; once embedding, final norm and (untied) LM head."""
    per_layer = 4 + (3 if _qkv_bias(cfg) else 0) + (2 if _qk_norm(cfg) else 0) + 2
    experts = cfg.get("num_experts", 0)
    per_layer += 1 + 3 * experts if experts else 3
    return cfg["num_hidden_layers"] * per_layer + 2 + (0 if cfg.get("tie_word_embeddings")
                                                       else 1)


def link_gbs(trainer_ranks: int, rollout_ranks: int, gpu: str = GPU) -> tuple[float, str]:
    """The bandwidth the bytes rule uses for a layout, and which link it is."""
    if trainer_ranks + rollout_ranks <= GPUS_PER_NODE:
        return load_hardware(gpu).link_bandwidth_gbs, "NVLink"
    return ACROSS_NODES_GBS, "across nodes"


def predict(params: float, trainer_ranks: int, rollout_ranks: int, gpu: str = GPU) -> float:
    """Seconds of one weight publication under the bytes rule: total parameters x 2 bytes
    over the layout's link. `params` is the TOTAL parameter count (every expert)."""
    gbs, _ = link_gbs(trainer_ranks, rollout_ranks, gpu)
    return BYTES_PER_PARAM * params / (gbs * 1e9)


def flat_sync_s(calibration: str = CALIBRATION) -> float:
    """What a run charged before #27: the calibration's weight_sync_s, whatever the model."""
    data = load_calibration(calibration)
    return float({**data.get("fixed", {}), **data.get("fit", {})}["weight_sync_s"])


def scaled_sync_s(params: float, calibration: str = CALIBRATION) -> float:
    """What a run charges now (`harness.sim.weight_sync`): the calibration's weight_sync_s
    times `params` (total, every expert) over its own model's total."""
    return flat_sync_s(calibration) * scale(params, load_calibration(calibration))


def scaled_by_calibration(table: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The scaled rule under every committed calibration that names its model: seconds for
    each verl row, and their ratios to the plain and checkpoint-engine times."""
    out = []
    for name in calibration_names():
        own = own_model(load_calibration(name))
        if own is None:
            continue
        rate = BYTES_PER_PARAM * load_model(own).params_b / flat_sync_s(name)
        secs = [scaled_sync_s(r["params_b"] * 1e9, name) for r in table]
        out.append({"calibration": name, "model": own, "flat_s": flat_sync_s(name),
                    "gbs": rate, "seconds": secs,
                    "over_plain": [s / r["plain_s"] for s, r in zip(secs, table, strict=True)],
                    "over_engine": [s / r["engine_s"]
                                    for s, r in zip(secs, table, strict=True)]})
    return out


def rows(params: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """One row per measured model; `params` overrides a model's total parameters (by the
    name in MEASURED), else the total comes from its config.json."""
    flat = flat_sync_s()
    out = []
    for m in MEASURED:
        cfg = read_config(m.config)
        total = float((params or {}).get(m.model, total_params(cfg)))
        gbs, link = link_gbs(m.trainer_ranks, m.rollout_ranks)
        pred = predict(total, m.trainer_ranks, m.rollout_ranks)
        n = tensors(cfg)
        out.append({
            "model": m.model, "params_b": total / 1e9, "published_b": m.published_b,
            "ranks": f"{m.trainer_ranks}+{m.rollout_ranks}", "link": link, "link_gbs": gbs,
            "tensors": n, "plain_s": m.plain_s, "engine_s": m.engine_s, "bytes_s": pred,
            "bytes_over_plain": pred / m.plain_s, "bytes_over_engine": pred / m.engine_s,
            "flat_s": flat, "flat_over_plain": flat / m.plain_s,
            "flat_over_engine": flat / m.engine_s, "scaled_s": scaled_sync_s(total),
            "scaled_over_plain": scaled_sync_s(total) / m.plain_s,
            "scaled_over_engine": scaled_sync_s(total) / m.engine_s,
            "plain_gbs": BYTES_PER_PARAM * total / m.plain_s / 1e9,
            "engine_gbs": BYTES_PER_PARAM * total / m.engine_s / 1e9,
            "plain_ms_per_tensor": (m.plain_s - pred) / n * 1e3})
    return out


def report(params: dict[str, float] | None = None) -> str:
    """The check as markdown: predicted against measured, both columns, and the readings."""
    table = rows(params)
    repo, path = SOURCE.split(":", 1)
    lines = [
        "## Weight synchronisation against verl's published times (H20, Megatron)\n",
        f"Measured: {repo}:", f"{path} (\"total sync time\", one synchronisation,",
        "without / with checkpoint-engine). Predicted (bytes rule): bf16 bytes of every "
        "parameter", f"over NVLink ({link_gbs(1, 1)[0]:.0f} GB/s, h20 preset) within one "
        f"{GPUS_PER_NODE}-GPU node, else {ACROSS_NODES_GBS:.0f} GB/s across",
        "nodes (the calibrations' rule).\n",
        "| model | params B | ranks | link | plain s | ckpt s | predicted s | pred/plain | "
        "pred/ckpt |", "|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(
            f"| {r['model']} | {r['params_b']:.2f} | {r['ranks']} | {r['link']} | "
            f"{r['plain_s']:g} | {r['engine_s']:g} | {r['bytes_s']:.3f} | "
            f"{r['bytes_over_plain']:.2f} | {r['bytes_over_engine']:.2f} |")
    lines += ["", *charged(table), "", "What the measurements imply (readings, not model "
              "terms):",
              "", "| model | tensors | plain GB/s | ckpt GB/s | plain ms/tensor beyond bytes |",
              "|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| {r['model']} | {r['tensors']:,} | {r['plain_gbs']:.1f} | "
                     f"{r['engine_gbs']:.1f} | {r['plain_ms_per_tensor']:.2f} |")
    lines += ["", reading(table), "", reading_scaled(table)]
    return "\n".join(lines) + "\n"


def charged(table: list[dict[str, Any]]) -> list[str]:
    """What a run charges for each verl row, before #27 (the calibration's weight_sync_s
    flat) and now (scaled by total weight bytes from the calibration's own model), under
    every committed calibration that names its model, with the ratios to verl's times."""
    lines = ["What a run charges: the calibration's weight_sync_s flat (before #27) and "
             "scaled by total", "weight bytes from the model the calibration names (now; "
             "GB/s: the rate that implies).", "",
             "| calibration | own model | GB/s | model | flat s | flat/plain | scaled s | "
             "sc/plain | sc/ckpt |", "|---|---|---|---|---|---|---|---|---|"]
    for c in scaled_by_calibration(table):
        for i, r in enumerate(table):
            lines.append(
                f"| {c['calibration']} | {c['model']} | {c['gbs']:.1f} | {r['model']} | "
                f"{c['flat_s']:g} | {c['flat_s'] / r['plain_s']:.3g} | {c['seconds'][i]:.2f} | "
                f"{c['over_plain'][i]:.3g} | {c['over_engine'][i]:.3g} |")
    return lines


def reading_scaled(table: list[dict[str, Any]]) -> str:
    """How the scaled charge compares with verl's times, with this table's numbers."""
    rows = {c["calibration"]: c for c in scaled_by_calibration(table)}
    own, pl = rows[CALIBRATION], rows.get("pipelinerl")
    span = table[-1]["params_b"] / table[0]["params_b"]
    text = (
        f"Scaled, the charge follows the {span:.0f}x range of totals that the flat one "
        "ignored; its level is the calibration's rate. The default "
        f"({CALIBRATION}: {own['flat_s']:g} s for {own['model']}, {own['gbs']:.1f} GB/s) "
        f"gives {', '.join(f'{x:.3g}' for x in own['over_plain'])} of the plain times "
        f"(7B, 30B, 235B): too slow everywhere, by most for the 7B, which verl syncs within "
        "one node.")
    if pl is not None:
        engine = [max(x, 1 / x) for x in pl["over_engine"][1:]]
        plain = [1 / x for x in pl["over_plain"][1:]]
        text += (
            f" PipelineRL's prior ({pl['flat_s']:g} s for {pl['model']}, {pl['gbs']:.1f} "
            f"GB/s) gives {', '.join(f'{x:.3g}' for x in pl['over_plain'])} of the plain "
            f"and {', '.join(f'{x:.3g}' for x in pl['over_engine'])} of the "
            f"checkpoint-engine times: within {max(engine):.2f}x of checkpoint-engine for "
            f"both MoE models, whose plain per-tensor sync takes {min(plain):.1f}-"
            f"{max(plain):.1f}x as long.")
    return textwrap.fill(text, width=95, break_on_hyphens=False)


def reading(table: list[dict[str, Any]]) -> str:
    """What the model misses and why, with this table's numbers (7B first, then the MoEs)."""
    small, moe = table[0], table[1:]
    short = [1 / r["bytes_over_plain"] for r in moe]
    per = [r["plain_ms_per_tensor"] for r in moe]
    flat = [r["flat_over_plain"] for r in moe]
    counts = " and ".join(f"{r['tensors']:,}" for r in moe)
    ratios = " and ".join(f"{r['bytes_over_engine']:.2f}" for r in moe)
    rates = " and ".join(f"{r['engine_gbs']:.0f}" for r in moe)
    text = (
        f"The flat weight_sync_s cannot follow a {moe[-1]['params_b'] / small['params_b']:.0f}x "
        f"range of parameters: {small['flat_over_plain']:.0f}x the 7B's plain time, "
        f"{min(flat):.2g}-{max(flat):.2g} of the MoE models'. The bytes rule grows with the "
        "total, as the issue asks, and still under-predicts every sync but one. Plain NCCL it is "
        f"{1 / small['bytes_over_plain']:.1f}x short for the 7B in one node "
        f"({small['plain_ms_per_tensor']:.2f} ms per tensor beyond the bytes) and "
        f"{min(short):.0f}-{max(short):.0f}x short for the MoE models: verl moves them one "
        "tensor at a "
        f"time ({counts} tensors, 128 "
        "experts x 3 per layer), each gathered from the trainer's expert-parallel ranks, "
        "broadcast by NCCL to every trainer and rollout rank and loaded by its own vLLM "
        "load_weights call; the time "
        f"beyond the bytes is {per[0]:.1f}-{per[-1]:.1f} ms per tensor "
        f"({' and '.join(r['ranks'] for r in moe)} ranks), a term the model does not have. "
        "With checkpoint-engine (4 GiB buckets) the rule gives "
        f"{ratios} of the "
        "measured time: the effective rate "
        f"({rates} GB/s) is below "
        f"the {ACROSS_NODES_GBS:.0f} GB/s prior, and the timed interval also holds a copy of "
        "the trainer's share to pinned CPU memory and back to a GPU. The 7B row sits in one "
        f"node; its checkpoint-engine time ({small['engine_s']:g} s) is below "
        f"{BYTES_PER_PARAM * small['params_b']:.1f} GB over one GPU's "
        f"{small['link_gbs']:.0f} GB/s NVLink ({small['bytes_s']:.3f} s), so it cannot cover "
        "a full copy of the weights into every rollout GPU, and the README does not say what "
        "it covers.")
    return textwrap.fill(text, width=95, break_on_hyphens=False)


if __name__ == "__main__":
    print(report())
