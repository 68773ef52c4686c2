"""The file `rolloutbench calibrate verl-async` writes (harness/sim/calibration/
verl-async.toml): the priors it carries and how the fitted values are laid out."""

from __future__ import annotations

from harness.core.files import git_commit
from harness.studies.reproduce.verl_async import runs

FIXED = {
    "bw_eff": 0.6101, "step_overhead_s": 0.002, "compute_eff": 0.5,
    "micro_overhead_s": 0.05, "weight_sync_s": 0.12, "materialize_s": 0.1, "drift": 0.002,
}
FIXED_NOTES = (
    "# bw_eff, compute_eff: the roofline's (the claims' roofline twin), RolloutPipe's fit and",
    "# prior carried over; the measured kernels price the engine otherwise",
    "# weight_sync_s: verl's own measurement of one parameter sync of Qwen2.5-Math-7B on H20",
    "# (fully_async_policy/README.md, checkpoint-engine table: 0.12 s without it)",
    "# materialize_s, micro_overhead_s, step_overhead_s, drift: the PipelineRL",
    "# calibration's priors, carried over",
    "# switch_s: one hand-over, from harness/sim/switch.py (the 7B under FSDP2 on 32 H20s;",
    "# each colocated run sets its own setup's): not fitted",
)


MFU_LINE = 0.4395  # the 7B's train_mfu as fitted at f167f47, before the kernel trainer
MEGATRON_MFU_LINE = 0.7616  # one-step-off Megatron's, the same fit
OWN_MODEL = "qwen2.5-7b"  # the model of verl's 0.12 s weight sync (FIXED_NOTES)
HARDWARE = [
    "", "[hardware]",
    "# the model whose publication weight_sync_s prices, and the trainer its fit belongs to",
    f'model = "{OWN_MODEL}"', 'trainer_gpu = "h20"', 'trainer_framework = "fsdp"',
    'source = "verl@1dda039 fully_async_policy/README.md:333-338 (H20, Qwen2.5-Math-7B, '
    'vllm+FSDP2)"',
]


def text(result: dict[str, float], lines: list[str], leads: dict[str, float]) -> list[str]:
    """The calibration file's lines: the 7B's fit in [fit], the priors, the leads, every
    setup's readings (`lines`) in [lengths], and the hardware."""
    text = ["# Written by `rolloutbench calibrate verl-async`; re-run it to reproduce.",
            "# Fitted to verl's colocated sync runs only (fully_async_policy/README.md:"
            "354-361, 446; one_step_off_policy/README.md:64, 66); the readings:",
            "# harness/studies/reproduce/verl_async/fit.py.",
            f"# commit: {git_commit()}", "", "[fit]",
            "# the 7B's kernel trainer, reading 'lengths from gen' (every run sets its own:",
            "# [lengths]): train_scale and train_step_fixed_s fitted to colocated 64 and 128",
            f"train_scale = {result['seven_b_train_scale']}",
            f"train_step_fixed_s = {result['seven_b_step_fixed_s']}",
            "# the MFU line's (sim.train_model=mfu), as last fitted under it (f167f47)",
            f"train_mfu = {MFU_LINE}", "", "[fixed]", *FIXED_NOTES]
    text += [f"{k} = {v}" for k, v in FIXED.items()]
    lead = leads.get("fsdp", 0.0)
    text.append(f"switch_s = {round(runs.switch_of(runs.SEVEN_B, 32, lead).handover_s, 4)}")
    text += ["", "[switch]",
             "# per framework, seconds a step: the slowest replica's lead over the mean in",
             "# the one-step-off colocated run at its fitted length, taken out of the",
             "# published gen - generate_sequences (harness/sim/switch.py: imbalance_s)",
             *[f"{k} = {v}" for k, v in sorted(leads.items())]]
    text += ["", "[lengths]",
             "# per setup (seven_b, moe, one_step_fsdp2, one_step_megatron): NAME, the mean",
             "# response tokens fitted to gen, with NAME_train_scale and NAME_step_fixed_s",
             "# fitted to training (a one-row setup: the scale alone, the fixed cost",
             "# carried); NAME_from_training, the mean fitted to training at the framework's",
             "# measured scale, with NAME_from_training_step_fixed_s; seven_b_f0_train_scale,",
             "# the scale with no fixed cost; size_N and per_size_*, the 7B's per-size",
             "# reading. PR #4307's swapped cells change no fit (colocate 32's training is",
             "# not fitted)", *lines, *HARDWARE]
    return text


def megatron_text(result: dict[str, float], leads: dict[str, float]) -> list[str]:
    """The Megatron setups' calibration (runs.MEGATRON_PAPER): the same priors, the one-step-
    off Megatron baseline's scale in [fit], and Megatron's passes for the kernel trainer
    (`[hardware] trainer_framework`: the simulator takes one framework a calibration, and
    FSDP's per-micro-batch gathers would price a Megatron trainer wrongly). Every run sets
    its own reading's scale and fixed cost ([lengths] of verl-async.toml)."""
    lead = leads.get("megatron", 0.0)
    switch = round(runs.switch_of(runs.ONE_STEP_MEGATRON, 16, lead).handover_s, 4)
    return ["# Written by `rolloutbench calibrate verl-async` beside verl-async.toml: verl's",
            "# Megatron setups (one-step-off Megatron, Qwen3-30B-A3B) under Megatron's passes;",
            "# their fits are verl-async.toml's [lengths] (every run sets its own).",
            f"# commit: {git_commit()}", "", "[fit]",
            "# the one-step-off Megatron baseline's kernel trainer, reading 'lengths from gen'",
            f"train_scale = {result.get('one_step_megatron_train_scale', 1.0)}",
            f"train_step_fixed_s = {result.get('one_step_megatron_step_fixed_s', 0.0)}",
            "# the MFU line's (sim.train_model=mfu), as last fitted under it (f167f47)",
            f"train_mfu = {MEGATRON_MFU_LINE}", "", "[fixed]", *FIXED_NOTES[:-2],
            "# switch_s: one hand-over of the one-step-off Megatron baseline (16 H20s)",
            *[f"{k} = {v}" for k, v in FIXED.items()], f"switch_s = {switch}", "",
            "[hardware]", f'model = "{OWN_MODEL}"', 'trainer_gpu = "h20"',
            'trainer_framework = "megatron"',
            'source = "verl@1dda039 one_step_off_policy/README.md:66 (H20, Qwen2.5-Math-7B, '
            'vllm+Megatron)"']
