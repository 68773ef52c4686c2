"""How long publishing a run's weights takes: a model of the transfer.

Why: one calibrated time scaled by bytes (the rule before issue #35) carried RolloutPipe's
1.7 GB/s over PCIe to every model and GPU (DeepSeek-V3 on H100s: 780 s a publication),
while published sync times (measurements/published/weight_sync.csv, about forty rows)
depend on the path, on whether tensors travel one by one or in buckets, and on the fleet.
So a publication is priced from what it moves and how:

    seconds = gather + transfer + bytes / (eff[path] x link) + staging

- gather (CUDA IPC only): expert tensors x c_expert x fan, when the trainer converts its
  shards to the engine's (Hugging Face) tensors one at a time: colocated, every rank
  materialises every routed expert's weight, each fetched from its expert-parallel rank by
  its own collective (slime, vime); a dense tensor's gather is counted in its bytes. On
  the other paths a tensor's gather is inside its per-tensor cost, or staged beforehand.
  0 when the trainer gathers in buckets.
- transfer: tensors x c_tensor x fan (one NCCL broadcast, or one CUDA IPC handle, per
  tensor) or buckets x c_bucket x fan (ceil(bytes / bucket)).
- fan = 1 + fan_per_doubling x log2(nodes) on the broadcast paths (nccl,
  checkpoint-engine): a broadcast's per-operation cost grows with the depth of the tree it
  spans (NCCL's inter-node broadcast). 1 for CUDA IPC: colocated, each node's trainer ranks
  feed that node's engines, nothing is sent to the whole fleet.
- the link: the GPU's NVLink within one node; across nodes the lesser of NVLink and the
  node's NICs (`GPUS_PER_NODE` x `nic_gbs`); `eff` per path is fitted.
- staging (checkpoint-engine only): each owner copies its share through host memory over
  PCIe (`host_gbs`), twice (out and back) when the weights come from the trainer.

The seven constants (`FITTED`) are fitted by `harness/studies/validate/weight_sync_fit.py`
on the rows it declares (`FIT_ROWS`) and checked there against the rest.

In a run (`charge`): a `sim.weight_sync_s` the run sets is taken as it is; a calibration's
own `weight_sync_s` stays for its own model on its own trainer GPU (the GPU its
`[hardware]` table names) unless `sim.weight_sync_path` names a path; any other model or
GPU is priced here, and the run says so once (`say`). A calibration that names no model
(a live machine's) is flat.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from harness.core.config import SYNC_PATHS as OPTIONS
from harness.sim.presets import load_hardware, load_model

PATHS = ("nccl", "ipc", "checkpoint-engine")  # OPTIONS: auto or one of these, cut
MIB = 1 << 20
# Buckets a run's publication uses: slime's --update-weight-buffer-size default, 512 MiB
# (THUDM/slime@5de8a67f2:slime/utils/arguments.py:273-275); verl's checkpoint-engine
# default device_buffer_size_M 4096 (verl-project/verl@cdd7d874:recipe/fully_async_policy/
# README.md:110)
BUCKET_BYTES = {"nccl": 512 * MIB, "ipc": 512 * MIB, "checkpoint-engine": 4096 * MIB}
GPUS_PER_NODE = 8  # an HGX/DGX board; GB200 NVL72's NVLink domain is its rack
DOMAIN = {"gb200": 72}
# Estimates, per GPU, GB/s one way: inter-node NIC (DGX H100/H200/B200: one 400 Gb/s
# ConnectX-7 per GPU; DGX A100: 200 Gb/s HDR; GB200/B300: 800 Gb/s ConnectX-8; PCIe cards:
# one 100 Gb/s port per 8 GPUs assumed) and host link (PCIe x16: Gen5 63 GB/s, Gen4 31.5,
# Gen6 126 GB/s raw; GB200: NVLink-C2C to Grace, assumed 200 GB/s a GPU)
NIC_GBS = {"a100-80gb-sxm": 25.0, "a100-40gb-pcie": 1.5625, "rtx-4090": 1.5625,
           "l40s": 1.5625, "cpu-2core": 1.5625, "gb200": 100.0, "b300-sxm": 100.0}
NIC_DEFAULT_GBS = 50.0
HOST_GBS = {"a100-80gb-sxm": 31.5, "a100-40gb-pcie": 31.5, "rtx-4090": 31.5, "l40s": 31.5,
            "cpu-2core": 10.0, "gb200": 200.0, "b300-sxm": 126.0}
HOST_DEFAULT_GBS = 63.0


@dataclass(frozen=True)
class Constants:
    """The transfer model's free constants (seconds, and shares of a link)."""

    c_expert: float  # per routed-expert tensor the trainer gathers one at a time
    c_tensor: float  # per tensor sent alone (one broadcast or one IPC handle)
    c_bucket: float  # per bucket
    fan_per_doubling: float  # per-operation cost grows by this per doubling of nodes
    eff_nccl: float
    eff_ipc: float
    eff_ckpt: float

    def eff(self, path: str) -> float:
        return {"nccl": self.eff_nccl, "ipc": self.eff_ipc,
                "checkpoint-engine": self.eff_ckpt}[path]


# Written from `python -m harness.studies.validate.weight_sync_fit` (the fit on FIT_ROWS);
# tests/test_weight_sync_fit.py refits and checks these digits (eff_ipc is a prior: PINNED).
FITTED = Constants(c_expert=1.133e-3, c_tensor=2.642e-4, c_bucket=1.637e-2,
                   fan_per_doubling=1.165, eff_nccl=1.0, eff_ipc=0.5, eff_ckpt=0.5394)


@dataclass(frozen=True)
class Transfer:
    """One publication: what moves, over what, and how it is cut."""

    path: str  # one of PATHS
    bytes: float
    tensors: int
    gpu: str  # the preset whose links carry it
    gpus: int  # GPUs it spans: trainer and rollout, or the shared ones when colocated
    gather_per_tensor: bool = True
    transfer_per_tensor: bool = False
    bucket_bytes: float = 512 * MIB
    owners: int = 1  # checkpoint-engine: ranks staging a share each through host memory
    host_passes: int = 2  # checkpoint-engine: 2 from the trainer (out, back), 1 from host
    split_nodes: bool = False  # trainer and rollout on different GPU types: never one node
    expert_tensors: int = 0  # of `tensors`, the routed experts'

    @property
    def nodes(self) -> int:
        """NVLink domains spanned (8-GPU nodes; a GB200 NVL72 rack is one)."""
        nodes = math.ceil(self.gpus / DOMAIN.get(self.gpu.lower(), GPUS_PER_NODE))
        return max(nodes, 2) if self.split_nodes else nodes

    @property
    def buckets(self) -> int:
        return math.ceil(self.bytes / self.bucket_bytes)


def nic_gbs(gpu: str) -> float:
    return NIC_GBS.get(gpu.lower(), NIC_DEFAULT_GBS)


def host_gbs(gpu: str) -> float:
    return HOST_GBS.get(gpu.lower(), HOST_DEFAULT_GBS)


def link_gbs(gpu: str, nodes: int) -> float:
    """GB/s the bytes of a publication see: NVLink (the preset's link) within one node;
    across nodes the lesser of that and the node's NICs."""
    nv = load_hardware(gpu).link_bandwidth_gbs
    per_node = DOMAIN.get(gpu.lower(), GPUS_PER_NODE)
    return nv if nodes <= 1 else min(nv, per_node * nic_gbs(gpu))


def parts(t: Transfer, k: Constants = FITTED) -> dict[str, float]:
    """Seconds of each term of one publication (their sum is `seconds`)."""
    fan = 1.0 + (0.0 if t.path == "ipc" else k.fan_per_doubling * math.log2(t.nodes))
    units = (t.tensors * k.c_tensor) if t.transfer_per_tensor else t.buckets * k.c_bucket
    staging = (t.host_passes * t.bytes / t.owners / (host_gbs(t.gpu) * 1e9)
               if t.path == "checkpoint-engine" else 0.0)
    gathers = t.gather_per_tensor and t.path == "ipc"
    return {"gather": t.expert_tensors * k.c_expert * fan if gathers else 0.0,
            "transfer": units * fan,
            "bytes": t.bytes / (k.eff(t.path) * link_gbs(t.gpu, t.nodes) * 1e9),
            "staging": staging}


def seconds(t: Transfer, k: Constants = FITTED) -> float:
    return sum(parts(t, k).values())


def tensor_count(cfg: dict[str, Any]) -> int:
    """Hugging Face-named weight tensors of a config.json's model (what a per-tensor sync
    moves one at a time): per layer the attention's (q, k, v, o; Qwen2's three biases,
    Qwen3's two q/k norms; DeepSeek-V3's latent projections and norms), two norms, and the
    dense MLP's three or the MoE's router (+ its bias) and three per expert (+ three for
    shared experts); once the embedding, final norm and an untied LM head."""
    kind = str(cfg.get("model_type", ""))
    layers = int(cfg["num_hidden_layers"])
    if "kv_lora_rank" in cfg:  # multi-head latent attention
        attn = 7 if cfg.get("q_lora_rank") else 5
    else:
        attn = 4 + (3 if cfg.get("attention_bias", kind == "qwen2") else 0)
        attn += 2 if kind.startswith("qwen3") else 0
    experts = int(cfg.get("num_experts") or cfg.get("n_routed_experts")
                  or cfg.get("num_local_experts") or 0)
    dense = int(cfg.get("first_k_dense_replace") or 0) if experts else layers
    router = 2 if (cfg.get("topk_method") == "noaux_tc" or kind == "minimax_m2") else 1
    moe = router + 3 * experts + (3 if cfg.get("n_shared_experts") else 0)
    return (layers * (attn + 2) + dense * 3 + (layers - dense) * moe
            + 2 + (0 if cfg.get("tie_word_embeddings") else 1))


def expert_tensor_count(cfg: dict[str, Any]) -> int:
    """Of `tensor_count`, the routed experts' (gate, up and down of each expert in each
    MoE layer)."""
    experts = int(cfg.get("num_experts") or cfg.get("n_routed_experts")
                  or cfg.get("num_local_experts") or 0)
    dense = int(cfg.get("first_k_dense_replace") or 0)
    return (int(cfg["num_hidden_layers"]) - dense) * experts * 3


def model_transfer_facts(model: str) -> tuple[float, int, int]:
    """(bf16 bytes of every weight, Hugging Face tensors, routed-expert tensors) of a
    preset or config.json."""
    from harness.sim.model_config import ModelConfigError, preset_config

    m = load_model(model)
    try:
        cfg = preset_config(m)
    except ModelConfigError:  # a user's MoE preset without a config.json: from its sizes
        cfg = {"num_hidden_layers": m.layers, "num_experts": m.experts,
               "tie_word_embeddings": m.tied_embeddings}
    return m.weight_bytes(2), tensor_count(cfg), expert_tensor_count(cfg)


def predict_sync_s(model: str, gpu: str, trainer_ranks: int, rollout_ranks: int,
                   path: str = "nccl", per_tensor: bool = False,
                   bucket_mib: float | None = None, colocated: bool = False) -> float:
    """Seconds of one publication of `model` (a preset or config.json, bf16) on `gpu`:
    `trainer_ranks` and `rollout_ranks` GPUs (colocated: the same GPUs, counted once),
    over `path` (nccl, ipc or checkpoint-engine), tensor by tensor or in buckets of
    `bucket_mib` (default `BUCKET_BYTES`), the trainer gathering tensor by tensor."""
    size, tensors, experts = model_transfer_facts(model)
    gpus = max(trainer_ranks, rollout_ranks) if colocated else trainer_ranks + rollout_ranks
    bucket = BUCKET_BYTES[path] if bucket_mib is None else bucket_mib * MIB
    return seconds(Transfer(path, size, tensors, gpu, gpus, True, per_tensor, bucket,
                            owners=max(trainer_ranks, 1), expert_tensors=experts))


def own_model(data: dict[str, Any]) -> str | None:
    """The model a calibration's weight_sync_s was measured or chosen for (None: not
    named, so the time is charged flat)."""
    name = data.get("hardware", {}).get("model")
    return str(name) if name else None


def publish_s(model: str, data: dict[str, Any], calibrated_s: float) -> float:
    """The rule before #35, kept for verl_async's fit until it calls `predict_sync_s`:
    the calibration's time scaled by total parameters over its own model's."""
    own = own_model(data)
    if own is None or own.lower() == model.lower():
        return calibrated_s
    return calibrated_s * load_model(model).params_b / load_model(own).params_b


def run_transfer(sim: Any) -> Transfer:
    """The publication a simulated run makes (`sim.weight_sync_path`; auto: CUDA IPC when
    colocated, else an NCCL broadcast; bucketed)."""
    colocated = sim.placement == "colocated"
    choice = sim.weight_sync_path
    path = ("ipc" if colocated else "nccl") if choice == "auto" else choice.split("-per")[0]
    rollout = sim.rollout_engines * sim.rollout_tp
    gpus = rollout if colocated else sim.trainer_gpus + rollout
    size, tensors, experts = model_transfer_facts(sim.model)
    owners = rollout if colocated else sim.trainer_gpus
    split = not colocated and sim.trainer_gpu.lower() != sim.rollout_gpu.lower()
    return Transfer(path, size, tensors, sim.rollout_gpu, gpus, True,
                    choice.endswith("per-tensor"), BUCKET_BYTES[path], owners, 2, split,
                    experts)


def _own_hardware(sim: Any, data: dict[str, Any]) -> bool:
    from harness.sim.trainer_mfu import trainer_gpu

    hardware = data.get("hardware", {})
    own, gpu = str(hardware.get("model", "")), hardware.get("trainer_gpu")
    return (own.lower() == sim.model.lower()
            and (gpu is None or str(gpu).lower() == trainer_gpu(sim).lower()))


def priced_here(sim: Any, data: dict[str, Any]) -> bool:
    """Whether this run's publication is priced by the transfer model (see the module)."""
    if sim.weight_sync_s is not None or own_model(data) is None:
        return False
    return sim.weight_sync_path != "auto" or not _own_hardware(sim, data)


def charge(sim: Any, data: dict[str, Any], calibrated_s: float) -> float:
    """Seconds one publication of the run's weights takes (silent; `say` tells it)."""
    return seconds(run_transfer(sim)) if priced_here(sim, data) else calibrated_s


def say(sim: Any, data: dict[str, Any], calibrated_s: float) -> None:
    """Say once per process that the transfer model priced this run's publication."""
    from harness.core.notes import say_once

    if not priced_here(sim, data):
        return
    t = run_transfer(sim)
    hardware = data.get("hardware", {})
    cut = "tensor by tensor" if t.transfer_per_tensor else f"{t.bucket_bytes / MIB:g} MiB buckets"
    text = (f"weight sync {seconds(t):.3g} s a publication, priced by the transfer model "
            f"(harness/sim/weight_sync.py: {t.path}, {cut}, {t.bytes / 1e9:.1f} GB, "
            f"{t.tensors:,} tensors, {t.nodes} node(s)); calibration {sim.calibration}'s "
            f"{calibrated_s:g} s belongs to {hardware.get('model')} on "
            f"{hardware.get('trainer_gpu', 'its GPUs')}. Your own: --set "
            f"sim.weight_sync_s=SECONDS, or sim.weight_sync_path={'|'.join(OPTIONS[1:])}")
    say_once(text)
