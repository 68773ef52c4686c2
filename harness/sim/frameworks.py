"""Each framework's engines as it runs them: the running-batch cap a replica gets when
`sim.max_running` is left at 0, read from the framework's code, not one number for all.

- vLLM, an engine built from its arguments (`LLM(...)` or `vllm serve`): 1,024 sequences
  on a GPU of 70 GiB or more that is not an A100, else 256
  (vllm-project/vllm, vllm 0.32.0 as installed here: vllm/engine/arg_utils.py:2894-2985,
  `EngineArgs.get_batch_defaults`; the same two branches since 0.9).
- SGLang: min(KV tokens // 2, its request pool), the pool min(max(KV tokens / context
  x 512, 2,048), 4,096) (sgl-project/sglang 0.5.5.post1: srt/managers/tp_worker.py:281-289,
  srt/model_executor/model_runner.py:1565-1574; `--max-running-requests` unset).
- slime: SGLang's, and its client keeps at most `--sglang-server-concurrency` = 512
  requests in flight per engine (THUDM/slime@624b824:slime/backends/sglang_utils/
  arguments.py:47, slime/rollout/sglang_rollout.py:94): the systems built on slime.
- verl: passes `rollout.max_num_seqs` = 1,024 to vLLM (verl-project/verl@b25bb7d:
  verl/trainer/config/rollout/rollout.yaml:68, vllm_rollout/vllm_async_server.py:215,
  vllm_rollout_spmd.py:203, the fully-async READMEs' era; 256 since e2ae919, verl@1dda039
  rollout.yaml:84): verl's systems and RollPacker (built on veRL).
- AReaL: leaves SGLang's default (inclusionAI/AReaL@4aef98d:areal/api/cli_args.py:1772).
- SkyRL: passes `max_num_seqs` = 1,024 (NovaSky-AI/SkyRL@a956457:
  skyrl/train/config/config.py:1172).
- The others (PipelineRL, NeMo-RL, Tinker, prime-rl): their engine's own default, by
  `sim.engine_backend` (whether each passes a value of its own is not read here).

Eras whose default rollout served vLLM without CUDA graphs (`EAGER_ERAS`, `eager_era`):
said for a reading of a run from that era, never switched on by default (it would move
every reproduction); `sim.engine_eager` prices such a step (harness/sim/kernels/eager.py).
"""

from __future__ import annotations

import json
from typing import Any

SLIME_CLIENT_CAP = 512  # slime's --sglang-server-concurrency, per engine
VERL_MAX_NUM_SEQS = 1024
SKYRL_MAX_NUM_SEQS = 1024
SGLANG_POOL = (2048, 4096)  # SGLang's request pool: floor and ceiling
DEFAULT_CONTEXT = 32768  # a model whose preset has no config.json: its context length

SLIME = ("slime", "cgp", "cgp-fgd", "april", "cgp-april", "cgp-tail", "slime-async")
VERL = ("verl", "verl-fully-async", "verl-dynamic", "verl-one-step-off", "rollpacker")


# framework -> when its default rollout ran vLLM with enforce_eager on, and where it says so
EAGER_ERAS = {
    "verl": "verl's rollout.enforce_eager: True until ff6978c (2025-08-08, #2956) "
            "(verl-project/verl@503ea75f:verl/trainer/config/rollout/rollout.yaml:35, the "
            "one-step-off README's commit; @94d681d, the same line, on a qwen3-32b-64-64 run's "
            "branch); False from ff6978c (@ff6978c, the same file, line 35)",
    "skyrl": "SkyRL's generator.enforce_eager: true from 5157c5fe (2025-10-28, #569) until "
             "059e6d9f (2026-06-22, #1818) (NovaSky-AI/SkyRL@5157c5fe:skyrl-train/skyrl_train/"
             "config/ppo_base_config.yaml:194; @059e6d9f:skyrl/train/config/config.py:582)",
}
FRAMEWORK_OF = {**dict.fromkeys(VERL, "verl"), "skyrl-async": "skyrl"}


def eager_era(system: str | None) -> str | None:
    """When the framework of `system` served its engines eagerly by default, with its
    source (None: no such era read); a reading sets sim.engine_eager from it, by hand."""
    return EAGER_ERAS.get(FRAMEWORK_OF.get(system or "", ""))


def vllm_max_num_seqs(memory_gb: float, gpu_name: str) -> int:
    """vLLM's own default for an engine built from its arguments on this GPU."""
    return 1024 if memory_gb >= 70 and "a100" not in gpu_name.lower() else 256


def sglang_max_running(kv_tokens: int, context: int) -> int:
    """SGLang's own default: half the KV tokens, at most its request pool."""
    low, high = SGLANG_POOL
    pool = min(max(int(kv_tokens / context * 512), low), high)
    return max(1, min(kv_tokens // 2, pool))


def model_context(sim: Any) -> int:
    """The model's context length as SGLang reads it (`max_position_embeddings` of its
    config.json), DEFAULT_CONTEXT where the preset has none."""
    from harness.sim.presets import load_model

    path = load_model(sim.model).config
    if path:
        try:
            with open(path, encoding="utf-8") as fh:
                return int(json.load(fh).get("max_position_embeddings") or DEFAULT_CONTEXT)
        except (OSError, ValueError, TypeError):
            return DEFAULT_CONTEXT
    return DEFAULT_CONTEXT


def engine_default(cfg: Any, system: str | None) -> tuple[int, str]:
    """(the running cap, whose default it is) of one replica of `cfg`'s engines for the
    framework of `system` (None: the engine's own, by sim.engine_backend)."""
    from harness.sim.engine_spec import kv_capacity_tokens
    from harness.sim.presets import load_hardware

    s = cfg.sim
    if system in VERL:
        return VERL_MAX_NUM_SEQS, "verl's rollout.max_num_seqs"
    if system == "skyrl-async":
        return SKYRL_MAX_NUM_SEQS, "SkyRL's max_num_seqs"
    own = system in SLIME or system == "areal"  # frameworks that serve with SGLang
    if own or s.engine_backend == "sglang":
        cap = sglang_max_running(kv_capacity_tokens(cfg), model_context(s))
        if system in SLIME:
            return min(cap, SLIME_CLIENT_CAP), "slime's --sglang-server-concurrency"
        return cap, "SGLang's own"
    hw = load_hardware(s.rollout_gpu)
    return vllm_max_num_seqs(hw.memory_gb, hw.name), "vLLM's own max_num_seqs"


def resolve_max_running(cfg: Any, system: str | None) -> None:
    """Fill `sim.max_running` left at 0 with `engine_default`'s cap. The value filled is
    remembered beside it (not a config field), so that a config validated for one system
    and then given another (plan, a reproduction's copy) is filled again for the new
    one, while a value set by hand afterwards is kept."""
    s = cfg.sim
    if s.max_running == 0 or s.max_running == getattr(s, "_max_running_filled", None):
        s.max_running = engine_default(cfg, system)[0]
        object.__setattr__(s, "_max_running_filled", s.max_running)
