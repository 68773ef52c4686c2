"""verl's dynamic-scheduling README, read as `rolloutbench plan` would: of its two static
splits of 32 H20s, which is rollout-bound, which trainer-bound, and which is faster.

The source (verl-project/verl@1dda039:verl/experimental/fully_async_policy/
dynamic_schedule/README.md, cited as ds.md): Qwen3.5-35B-A3B on DAPO-Math-17k, Megatron
TP 4 x PP 2 x EP 8, H20 (ds.md:326-329); 16 training + 16 rollout GPUs and 8 + 24
(:333-334); 16+16 is production (rollout) bound, 8+24 consumption (trainer) bound
(:361-362, :399-402); dynamic scheduling is 15.3% faster than 8+24 and 17.5% faster than
16+16 (:339), so 8+24 takes 0.825 / 0.847 = 0.974 of 16+16's time. Its script
(shell/run_qwen35_35b_a3b_math_dynamic_megatron.sh, cited as ds.sh): rollout.n 8 (:75),
mini-batch 16 prompts (:77), require_batches 1 and trigger 4 (:51-52: a sync every 64
prompts), staleness 0.5 and partial rollout (:50, :53), responses up to 64,000 tokens
(:64), SGLang at TP 8 (:97-98) with standalone memory 0.7 (:100), speculative decoding by
MTP (:28-37: not modelled here).

Qwen3.5-35B-A3B cannot be expressed: its config.json (models/qwen3.5-35b-a3b, the
defaults of transformers' Qwen3_5MoeTextConfig, which names that checkpoint) is refused,
and the line that refuses it is kept (`refusal`). The nearest expressible model, the
`qwen3-30b-a3b` preset (a 3B-active Qwen MoE of 128 experts, without Qwen3.5's linear
attention), stands in, and every row says so. The simulator's H20 trainer is the kernel
trainer at Megatron's measured scale (the `areal` calibration's
fit belongs to H800s), nothing fitted here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.core.config import RunConfig
from harness.studies.claims import Claim
from harness.studies.reproduce.pool import step_model_override

SOURCE = "verl@1dda039 dynamic_schedule/README.md"
MODEL = Path(__file__).parent / "models" / "qwen3.5-35b-a3b" / "config.json"
STAND_IN = "qwen3-30b-a3b"
SPLITS = ((16, 16), (8, 24))  # (trainer GPUs, rollout GPUs), ds.md:333-334
FASTER = (1 - 0.175) / (1 - 0.153)  # 8+24's time over 16+16's: 0.974 (ds.md:339)
WAIT_BOUND = 0.05  # a trainer waiting more than this share of its time is rollout-bound
READING = f"stand-in {STAND_IN} (Qwen3.5-35B-A3B is refused)"


def refusal() -> str:
    """The one line the simulator answers Qwen3.5-35B-A3B with ('' if it were accepted)."""
    from harness.sim.presets import load_model

    try:
        load_model(str(MODEL))
    except Exception as err:  # noqa: BLE001  (the refusal's text is the finding)
        line = str(err).splitlines()[0]
        return line.replace(str(MODEL), "models/qwen3.5-35b-a3b/config.json")  # any checkout
    return ""


def config(trainer: int, rollout: int, seed: int = 0) -> RunConfig:
    """verl's fully-async run of ds.sh on `trainer` + `rollout` H20s, the stand-in model."""
    cfg = RunConfig(system="verl-fully-async", workload="dapo-math-17k", seed=seed,
                    group_size=8, groups=64, update_groups=16, max_response_tokens=64000)
    cfg.rounds = 6
    s = cfg.sim
    s.calibration, s.model, s.engine_backend = "areal", STAND_IN, "sglang"
    s.rollout_gpu = s.trainer_gpu = "h20"
    s.rollout_tp, s.rollout_engines, s.mem_fraction = 8, rollout // 8, 0.7
    s.trainer_gpus, s.trainer_ep = trainer, 8
    s.log_prob_forwards = 0  # calculate_log_probs from the engine (ds.sh:103)
    # the claims' roofline twin's step model, as the reproduction's pool sets it on the runs
    # it is handed (so a call outside the pool gets it too)
    s.step_model = step_model_override() or s.step_model  # type: ignore[assignment]
    v = cfg.verl_async
    v.staleness_threshold, v.trigger_parameter_sync_step = 0.5, 4
    v.require_batches, v.partial_rollout = 1, True
    return cfg.validate()


def evaluate(seed: int, traces: Path, progress: bool = True
             ) -> dict[tuple[int, int], dict[str, Any]]:
    """plan's figures of each split (harness.studies.plan.evaluate's `figures`), run in the
    reproduction's pool: here, the parent would load the compiled core for two small runs
    (1.1 CPU s against 0.16 in a worker that has it)."""
    from harness.core.trace_io import trace_file
    from harness.studies.plan.evaluate import figures
    from harness.studies.reproduce.grid import run_configs

    tasks = [(config(trainer, rollout, seed), trace_file(traces, f"dynsched-{trainer}+{rollout}"))
             for trainer, rollout in SPLITS]
    done = run_configs(tasks, label="verl dynamic schedule", progress=progress, reader=figures)
    return dict(zip(SPLITS, done, strict=True))


def bound(figures: dict[str, Any]) -> str:
    """rollout-bound when the trainer waits for samples, else trainer-bound."""
    return "rollout" if figures["paper_waiting_ratio"] > WAIT_BOUND else "trainer"


def claims(points: dict[tuple[int, int], dict[str, Any]]) -> list[Claim]:
    """The README's three statements against plan's figures of the stand-in."""
    (t16, r16), (t8, r24) = SPLITS
    a, b = points[(t16, r16)], points[(t8, r24)]
    config16, config8 = f"{t16}+{r16} (ds.md:361)", f"{t8}+{r24} (ds.md:362)"
    return [
        Claim("areal", "verl dynamic schedule: 16+16 is rollout-bound (1 = holds)", "bound",
              config16, 1.0, 1.0, float(bound(a) == "rollout"), 0.0, reading=READING),
        Claim("areal", "verl dynamic schedule: 8+24 is trainer-bound (1 = holds)", "bound",
              config8, 1.0, 1.0, float(bound(b) == "trainer"), 0.0, reading=READING),
        Claim("areal", "verl dynamic schedule: 8+24's time over 16+16's (x)", "speedup",
              "8+24 against 16+16 (ds.md:339)", FASTER, FASTER,
              a["trained_tokens_per_s"] / b["trained_tokens_per_s"], 0.10, reading=READING)]
