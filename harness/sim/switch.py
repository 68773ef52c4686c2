"""The switch between engine and trainer on a shared (colocated) placement, per framework.

A colocated step hands its GPUs over twice: to the engine (the trainer's parameters
onloaded for a `state_dict`, the engine's weights woken and overwritten by the trainer's
resharded ones, the trainer offloaded, the KV cache re-allocated) and back to the trainer
(the engine put to sleep: weights to the host, KV cache released; the trainer's
parameters, gradients and optimizer onloaded for `old_log_prob` and `update_actor`, and
offloaded after). verl does exactly this (verl-project/verl@503ea75f5, the commit that
published the one-step-off measurements below, cited as verl@503ea75:
verl/workers/sharding_manager/fsdp_vllm.py:193-240 and megatron_vllm.py:143-191 for the
engine's side; verl/workers/fsdp_workers.py:671-711 and 757-793 at verl@94d681d for the
trainer's).

What is published: verl's one-step-off README times the colocated `gen` (the whole
sharding-manager block) and `generate_sequences` (the engine's generation alone) on 16
H20s for Qwen2.5-Math-7B (verl@1dda039:verl/experimental/one_step_off_policy/README.md:
64, 66): gen minus generate_sequences is 321 - 247 = 74 s a step under FSDP2 and 207 - 162
= 45 s under Megatron. That difference is an upper bound of the engine's side of the
switch: `generate_sequences` is the mean over ranks (verl@503ea75:verl/workers/
fsdp_workers.py:748-750, `reduce_timing` averages), so the difference also holds the
slowest rank's lead over the mean and the batch's dispatch. Where the simulator prices
that lead itself (verl's static split, harness/sim/dispatch.py), `imbalance_s` takes it
out; a lead above the published seconds leaves no fixed part (the two cannot both be
right: the measurement bounds switch plus lead).

The rest is bytes over the host link (PCIe) from the GPU's preset: the engine's weight
shard to the host and back (vLLM `sleep(level=1)` / `wake_up`), the trainer's shards on
and off. At 16 H20s these are under a second (`Switch.link_s`), so the published
seconds are almost all a fixed cost a step (resharding tensor by tensor, allocator
calls, the KV cache's re-mapping) that each GPU pays in parallel: the fixed part is
carried to other GPU counts and models of the same framework unchanged, and the bytes
re-priced for the setup. Where nothing is published (`PUBLISHED` has no framework),
the switch is its bytes alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.sim.presets import load_model

# verl@1dda039:verl/experimental/one_step_off_policy/README.md:64, 66: (gen,
# generate_sequences) of the colocated sync rows; both on 16 H20s, Qwen2.5-Math-7B, vLLM at
# TP 2, the trainer offloaded (shell/dapo_7b_math_fsdp2_colocate.sh:52-54: offload=True,
# gen_tp 2; dapo_7b_math_megatron_colocate.sh:53-56: offload=True, gen_tp 2, TP 2 x PP 2).
PUBLISHED = {
    "fsdp": {"gen_s": 321.0, "generate_s": 247.0, "model": "qwen2.5-7b", "gpus": 16,
             "engine_tp": 2, "trainer_shard": 16, "gpu": "h20", "line": 64},
    "megatron": {"gen_s": 207.0, "generate_s": 162.0, "model": "qwen2.5-7b", "gpus": 16,
                 "engine_tp": 2, "trainer_shard": 4, "gpu": "h20", "line": 66},
}
# Host link per GPU, GB/s one direction: PCIe 5.0 x16 (Hopper SXM boards, H20 included) is
# 64 GB/s raw (PCI-SIG 5.0: 32 GT/s x 16 lanes); copies reach about 0.8 of it (an
# ESTIMATE, as hardware.toml's PCIe 4.0 figures: 25 of 31.5). Other GPUs: PCIe 4.0's 25.
HOST_LINK_GBS = {"h20": 51.0, "h100-sxm": 51.0, "h200-sxm": 51.0, "h800-sxm": 51.0,
                 "b200": 51.0}
DEFAULT_HOST_LINK_GBS = 25.0
# Bytes a parameter a trainer keeps per state, by framework: verl's FSDP actor holds fp32
# parameters (mixed precision computes in bf16) and Adam's two fp32 moments; Megatron bf16
# parameters, fp32 main gradients, and a distributed optimizer's fp32 master copy and
# moments (sharded over data parallel too: `optimizer_shard`).
STATE_BYTES = {"fsdp": {"params": 4, "grads": 0, "optimizer": 8},
               "megatron": {"params": 2, "grads": 4, "optimizer": 12}}


@dataclass(frozen=True)
class Switch:
    """One colocated step's switch: its bytes a GPU over the host link and its seconds."""

    engine_bytes: float  # a GPU's bytes over the link in the engine's side (in verl's gen)
    trainer_bytes: float  # in the trainer's calls (verl's old_log_prob and update_actor)
    link_gbs: float
    fixed_s: float  # the published seconds less their bytes; 0 where nothing is published

    @property
    def link_s(self) -> float:
        return (self.engine_bytes + self.trainer_bytes) / (self.link_gbs * 1e9)

    @property
    def engine_s(self) -> float:
        """The engine's side: what verl's colocated `gen` holds beside the generation."""
        return self.fixed_s + self.engine_bytes / (self.link_gbs * 1e9)

    @property
    def trainer_s(self) -> float:
        """The trainer's side: in verl's `old_log_prob` and `update_actor`."""
        return self.trainer_bytes / (self.link_gbs * 1e9)

    @property
    def step_s(self) -> float:
        return self.engine_s + self.trainer_s

    @property
    def handover_s(self) -> float:
        """The runtime's `switch_s`: a step's switch over its two hand-overs
        (harness/sim/placement.py's GpuShare charges each)."""
        return self.step_s / 2


def host_bytes(framework: str, model: str, engine_tp: int, trainer_shard: int,
               optimizer_shard: int) -> tuple[float, float]:
    """(engine side, trainer side): a GPU's bytes over the host link in one colocated step.

    Engine side: the engine's bf16 weight shard to the host at sleep and back at wake
    (2 x 2P / engine_tp), the trainer's parameter shard onloaded for the state_dict and
    offloaded after. Trainer side: parameters on and off for old_log_prob and again for
    update_actor, gradients and the optimizer on and off for update_actor."""
    if framework not in STATE_BYTES:
        raise ValueError(f"switch: framework {framework!r} is not one of "
                         f"{', '.join(sorted(STATE_BYTES))}")
    p = load_model(model).params_b * 1e9
    b = STATE_BYTES[framework]
    params = b["params"] * p / trainer_shard
    engine = 2 * 2 * p / engine_tp + 2 * params
    trainer = 2 * params * 2 + 2 * b["grads"] * p / trainer_shard
    trainer += 2 * b["optimizer"] * p / optimizer_shard
    return engine, trainer


def switch(framework: str, model: str, gpu: str, gpus: int, engine_tp: int,
           trainer_shard: int = 0, imbalance_s: float = 0.0) -> Switch:
    """The switch of a colocated step on `gpus` GPUs of `gpu`: the engine at `engine_tp`,
    the trainer's parameters split over `trainer_shard` GPUs (0: all of them, FSDP) and its
    optimizer over all; `imbalance_s` a step's rank imbalance to take out of the published
    seconds (0: none priced elsewhere)."""
    shard = trainer_shard or gpus
    link = HOST_LINK_GBS.get(gpu, DEFAULT_HOST_LINK_GBS)
    engine, trainer = host_bytes(framework, model, engine_tp, shard, gpus)
    fixed = 0.0
    pub = PUBLISHED.get(framework)
    if pub is not None:
        e0, _ = host_bytes(framework, str(pub["model"]), int(pub["engine_tp"]),
                           int(pub["trainer_shard"]), int(pub["gpus"]))
        link0 = HOST_LINK_GBS.get(str(pub["gpu"]), DEFAULT_HOST_LINK_GBS)
        published = float(pub["gen_s"]) - float(pub["generate_s"]) - imbalance_s
        fixed = max(0.0, published - e0 / (link0 * 1e9))
    return Switch(engine, trainer, link, fixed)
