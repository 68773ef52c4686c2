"""The simulated cluster's settings (`[sim]` of a run's configuration): the model, the GPUs
and their split, the engine and trainer models and the calibration. A part of `RunConfig`
(harness/core/config.py), which validates it with the rest."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from harness.core.fields import opt

STEP_MODELS = ("kernels", "roofline")  # sim.step_model
TRAIN_MODELS = ("kernels", "mfu")  # sim.train_model
PRECISIONS = ("bf16", "fp8")  # sim.rollout_precision and sim.rollout_kv_dtype
# sim.rollout_precision alone may also be fp4: NVFP4 weights, measured kernels on Blackwell
WEIGHT_PRECISIONS = (*PRECISIONS, "fp4")
ENGINE_BACKENDS = ("sglang", "vllm")  # sim.engine_backend: frameworks with measured kernels
# sim.weight_sync_path: how a publication travels (harness/sim/weight_sync.py)
SYNC_PATHS = ("auto", "nccl", "nccl-per-tensor", "ipc", "ipc-per-tensor", "checkpoint-engine")
DRAFTERS = ("off", "draft", "mtp", "ngram")  # sim.spec_drafter (harness/sim/speculative.py)
# Speculative decoding's fields: in a trace's header only when sim.spec_drafter is on, so that
# every trace of a run without it stays byte for byte what it was (RunConfig.to_dict).
SPEC_FIELDS = ("spec_drafter", "spec_tokens", "spec_acceptance", "spec_acceptance_by_workload",
               "spec_draft_model", "spec_draft_token_s", "spec_drafter_sync",
               "spec_acceptance_decay", "spec_group_acceptance", "spec_max_batch")


@dataclass
class SimConfig:
    """The simulated cluster. `None` calibrated values come from `calibration`."""

    model: str = opt("qwen3-1.7b", "policy model preset (harness/sim/presets/models.toml)")
    rollout_gpu: str = opt("a100-40gb-pcie",
                           "GPU preset of the rollout engines (harness/sim/presets/hardware.toml)")
    rollout_tp: int = opt(2, "tensor-parallel size of each engine replica (GPUs per replica)")
    rollout_ep: int = opt(1, "expert-parallel size of each replica (MoE models): the experts "
                          "split over EP groups, each expert over TP/EP GPUs; divides rollout_tp")
    rollout_attention_dp: int = opt(1, "attention data-parallel ranks of each replica (MoE "
                                    "models): each rank runs attention on TP/DP GPUs for its own "
                                    "sequences and KV cache; divides rollout_tp")
    rollout_precision: str = opt("bf16", "rollout weights and matmuls: bf16, fp8 (FP8 "
                                 "weights, per-block where the checkpoint is block-scaled) or "
                                 "fp4 (NVFP4; measured kernels on Blackwell GPUs only)")
    rollout_kv_dtype: str = opt("bf16", "KV-cache element type of the engines: bf16 or fp8")
    rollout_engines: int = opt(1, "engine replicas; requests go to the least loaded one")
    placement: str = opt("disaggregated", "disaggregated (own GPUs for engine and trainer) or "
                         "colocated (they take turns on the rollout GPUs)")
    mem_fraction: float = opt(0.85, "share of each GPU's memory the engine may use "
                              "(weights plus KV cache), in (0, 1)")
    dispatch: str = opt("auto", "how requests reach replicas: least-loaded, static (verl's "
                        "contiguous split of a round), round-robin (verl fully-async's), "
                        "auto (the system's framework's)")
    max_running: int = opt(0, "most sequences in one replica's running batch (0: the "
                           "framework's default: verl 1024, slime 512, SGLang's, vLLM's)")
    kv_cache_tokens: int = opt(0, "KV-cache tokens of one replica (0: from the GPU's memory, "
                               "mem_fraction and the model; set it to a live engine's cache)")
    trainer_gpu: str = opt("rtx-4090", "GPU preset of the trainer (disaggregated placement)")
    trainer_gpus: int = opt(8, "trainer GPUs (disaggregated placement)")
    trainer_ep: int = opt(1, "expert-parallel size of the trainer (MoE models): each expert "
                          "lives on one of EP groups, tokens reach it by all-to-all; divides "
                          "the trainer's GPUs")
    trainer_pp: int = opt(1, "pipeline stages of the trainer (Megatron): the memory check "
                          "holds each GPU to its stage's layers; EP x PP divides its GPUs")
    trainer_vpp: int = opt(1, "virtual pipeline stages per GPU (Megatron's interleaved "
                           "schedule; needs trainer_pp >= 2)")
    trainer_tp: int = opt(1, "tensor-parallel size of the trainer (kernel trainer: its "
                          "products split, TP/SP collectives priced); TP x CP x PP divides "
                          "its GPUs")
    trainer_cp: int = opt(1, "context-parallel size of the trainer (kernel trainer: a "
                          "sequence's tokens split, keys and values exchanged)")
    micro_batch_tokens: int = opt(16384, "most tokens in one trainer micro-batch")
    log_prob_forwards: int = opt(1, "trainer: forward passes besides the update's: 1 old "
                                 "log-probs, 0 the engine's, 2 and a KL reference's")
    verifier_workers: int = opt(0, "reward checks running at a time; 0: no limit")
    step_model: str = opt("kernels", "engine step times: kernels (NVIDIA's measured-kernel "
                          "database, where it covers the GPU and framework; else the roofline, "
                          "said once) or roofline (bandwidth and FLOPs at fitted efficiencies)")
    train_model: str = opt("kernels", "trainer times: kernels (measured kernels, layout, fixed "
                           "costs: harness/sim/trainer; the MFU line where the database has no "
                           "kernels for the trainer's GPU, said once) or mfu (FLOPs over "
                           "train_mfu); a set sim.train_mfu takes the MFU line")
    train_scale: float | None = opt(None, "kernel trainer: its kernel time over the database's "
                                    "kernels (None: the calibration's fit on its own trainer "
                                    "GPU, else the framework's measured constant)")
    train_step_fixed_s: float | None = opt(None, "kernel trainer: seconds per optimizer step "
                                           "that do not shrink with GPUs (None: the "
                                           "calibration's fit on its own trainer GPU, else 0)")
    trainer_precision: str = opt("bf16", "trainer matmuls under train_model=kernels: bf16 or "
                                 "fp8 (per-tensor scaled GEMMs; attention stays bf16)")
    engine_backend: str = opt("sglang", "serving framework whose measured kernels price the "
                              "engine: sglang or vllm")
    engine_eager: bool = opt(False, "decode steps without CUDA graphs (vLLM's enforce_eager, "
                             "as verl ran it until ff6978c): max(graph-timed kernels + launch "
                             "gaps, host time of the layers' torch calls), measured on dense "
                             "BF16 layers only (docs/simulator.md, eager engines)")
    calibration: str = opt("rolloutpipe", "calibration file the unset (None) parameters below "
                           "come from (harness/sim/calibration/NAME.toml)")
    bw_eff: float | None = opt(None, "decode: fraction of HBM bandwidth reached "
                               "(None: from the calibration)")
    step_overhead_s: float | None = opt(None, "decode: fixed seconds per engine step "
                                        "(None: from the calibration)")
    compute_eff: float | None = opt(None, "prefill and decode: fraction of peak BF16 FLOPs "
                                    "reached (None: from the calibration)")
    train_mfu: float | None = opt(None, "trainer: model FLOPs utilisation "
                                  "(None: from the calibration)")
    micro_overhead_s: float | None = opt(None, "trainer: fixed seconds per micro-batch "
                                         "(None: from the calibration)")
    weight_sync_s: float | None = opt(None, "seconds to publish weights from trainer to engine "
                                      "(None: from the calibration)")
    weight_sync_path: str = opt("auto", "publication path priced by the transfer model: auto "
                                "(ipc colocated, else nccl; the calibration's weight_sync_s on "
                                "its own model and trainer GPU), nccl, nccl-per-tensor, ipc, "
                                "ipc-per-tensor or checkpoint-engine (512 MiB / 4 GiB buckets)")
    materialize_s: float | None = opt(None, "seconds per group for rewards' statistics and "
                                      "advantages (None: from the calibration)")
    drift: float | None = opt(None, "variance of a token's log importance ratio per step of "
                              "lag, for the ESS model (None: from the calibration)")
    switch_s: float | None = opt(None, "colocated: seconds per hand-over of the GPUs between "
                                 "engine and trainer (None: the system's framework's switch, "
                                 "harness/sim/switch.py; the calibration's for a live "
                                 "calibration or a framework without a colocated mode)")
    spec_drafter: str = opt("off", "speculative decoding's drafter: off, draft (a draft model, "
                            "sim.spec_draft_model), mtp (the policy's one-layer MTP head) or "
                            "ngram (a host lookup over the sequence's own tokens); "
                            "docs/simulator.md, speculative decoding")
    spec_tokens: int = opt(3, "speculative decoding: k, tokens drafted a sequence a step and "
                           "verified in one forward of k + 1 positions")
    spec_acceptance: float = opt(0.8, "speculative decoding: alpha, the chance a drafted token "
                                 "is accepted (i.i.d. until the first rejection): a step "
                                 "yields (1 - alpha^(k+1)) / (1 - alpha) tokens a sequence")
    spec_acceptance_by_workload: str = opt("", "speculative decoding: alpha per workload, "
                                           "'NAME=ALPHA,NAME=ALPHA' (others: spec_acceptance)")
    spec_draft_model: str = opt("", "spec_drafter=draft: the draft model's preset (or "
                                "config.json), run on the engine's GPUs at its TP")
    spec_draft_token_s: float = opt(1e-6, "spec_drafter=ngram: host seconds a drafted token "
                                    "a sequence (an estimate)")
    spec_drafter_sync: int = opt(1, "speculative decoding: weight versions between the "
                                 "drafter's syncs with the policy (1: every update, as "
                                 "SkyRL's MTP head; 0: never, a frozen draft model)")
    spec_acceptance_decay: float = opt(0.0, "speculative decoding: each version the policy "
                                       "is past the drafter's last sync multiplies alpha by "
                                       "(1 - this), in [0, 1)")
    spec_group_acceptance: float = opt(-1.0, "speculative decoding from the group's own "
                                       "responses (Seer's grouped drafter): alpha of a "
                                       "sequence once a sibling in its group has finished, "
                                       "in [0, 1] (-1: off, spec_acceptance for all)")
    spec_max_batch: int = opt(0, "speculative decoding only while a replica runs at most "
                              "this many sequences, plain steps above it (TLT's bs_threshold "
                              "32, EfficientRollout's toggle); 0: at every batch")


def check_spec(s: SimConfig, need: Callable[[bool, str, str], None]) -> None:
    """Refuse speculative decoding's settings in one line naming the field (`need`)."""
    need(s.spec_drafter in DRAFTERS, "set sim.spec_drafter",
         f"must be one of {', '.join(DRAFTERS)}, not {s.spec_drafter!r}")
    if s.spec_drafter == "off":
        return
    need(s.spec_tokens >= 1, "set sim.spec_tokens",
         f"must be >= 1 (tokens drafted a step), got {s.spec_tokens}")
    need(0 <= s.spec_acceptance <= 1, "set sim.spec_acceptance",
         f"must lie in [0, 1], got {s.spec_acceptance}")
    try:
        by_workload(s.spec_acceptance_by_workload)
    except ValueError as err:
        need(False, "set sim.spec_acceptance_by_workload", str(err))
    need(s.spec_drafter != "draft" or bool(s.spec_draft_model), "set sim.spec_draft_model",
         "spec_drafter=draft needs the draft model's preset (e.g. qwen3-1.7b)")
    need(s.spec_draft_token_s >= 0, "set sim.spec_draft_token_s",
         f"must be >= 0, got {s.spec_draft_token_s}")
    need(s.spec_drafter_sync >= 0, "set sim.spec_drafter_sync",
         f"must be >= 0 (0: never), got {s.spec_drafter_sync}")
    need(0 <= s.spec_acceptance_decay < 1, "set sim.spec_acceptance_decay",
         f"must lie in [0, 1), got {s.spec_acceptance_decay}")
    g = s.spec_group_acceptance
    need(g == -1 or 0 <= g <= 1, "set sim.spec_group_acceptance",
         f"must be -1 (off) or lie in [0, 1], got {g}")
    need(s.spec_max_batch >= 0, "set sim.spec_max_batch",
         f"must be >= 0 (0: speculate at every batch), got {s.spec_max_batch}")


def by_workload(text: str) -> dict[str, float]:
    """`sim.spec_acceptance_by_workload`, 'NAME=ALPHA,NAME=ALPHA', as a dict; a malformed
    entry is a ValueError naming it."""
    out: dict[str, float] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = item.partition("=")
        try:
            alpha = float(value)
        except ValueError:
            alpha = math.nan
        if not sep or not name.strip() or not 0.0 <= alpha <= 1.0:
            raise ValueError(f"{item!r} is not NAME=ALPHA with ALPHA in [0, 1]")
        out[name.strip()] = alpha
    return out
