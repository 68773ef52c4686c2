"""The trainer model's few constants, each from measurements, never from a prediction.

Per framework family, two numbers fitted by least squares (`harness.sim.trainer.fit`) on
rows DECLARED in `harness.sim.trainer.fit.FIT_ROWS` before any error was looked at:

- `fixed_s`: seconds per micro-batch (forward + backward) on each GPU that do not shrink
  with GPUs or tokens: kernel launches and the host's dispatch of thousands of ops.
- `scale`: the training stack's kernel time over the database's serving kernels for the
  same products and attention (norms, rotary, activation functions, the loss and the
  optimizer's casts run between them and are not in the tables).

`forward_fixed_s`: a forward-only pass's fixed cost (old log-probs, a reference model).

Megatron: the project's own H100 runs (measurements/h100-sxm/trainer, Megatron-core 0.16.1,
Qwen3-1.7B, local spec, no Transformer Engine, eager). FSDP: prime-rl's published H100 rows
(measurements/published/prime_rl_trainer.csv, FSDP2 with torch.compile); its forward-only
cost takes Megatron's forward / forward-backward ratio of fixed costs (no FSDP forward-only
row is published). DeepSpeed's ZeRO-3 takes FSDP's (the same gathers per pass).

`ADAM_OVER_BYTES`: the measured Adam step over 16 bytes per parameter at the HBM
bandwidth (7.89 dense, 9.74 MoE; measurements/h100-sxm/trainer runs 1-3, Megatron's
optimizer with torch's Adam): their mean.
"""

from __future__ import annotations

# `harness.studies.validate.gpu.trainer_bench.fitted_constants()`, rounded (2026-11-28).
# FSDP's fixed cost is large because prime-rl's RL trainer does per-step work besides the
# kernels (its SFT rows run 0.6B at 16k in 0.64 s a micro-batch against RL's 1.38 s): one
# constant per micro-batch carries it, so SFT rows are over-predicted (trainer_check.md).
FRAMEWORKS: dict[str, dict[str, float]] = {
    "megatron": {"fixed_s": 0.117, "scale": 1.56, "forward_fixed_s": 0.0457},
    "fsdp": {"fixed_s": 1.13, "scale": 1.64, "forward_fixed_s": 0.439},
}
FRAMEWORKS["deepspeed"] = FRAMEWORKS["fsdp"]

ADAM_OVER_BYTES = 8.81
ADAM_BYTES_PER_PARAM = 16  # bf16 weight and gradient, fp32 master, two fp32 moments
ATTENTION_BACKWARD_OVER_FORWARD = 2.5
# FlashAttention's backward does 5 matrix products per tile against the forward's 2: its
# own benchmarks count the backward's FLOPs as 2.5 x the forward's
# (Dao-AILab/flash-attention@c082294e:benchmarks/benchmark_flash_attention.py, `flops`);
# the database times no attention backward.
