"""Which silicon-sample rows are put to the simulator, and the engine each row describes.

Why a keeper and not a filter: the sample's rows differ in precision, expert parallelism,
attention data parallelism and architecture; those are settings of a simulated engine, so the
keeper turns them into `sim.*` values and the simulator itself says whether it can price
them (`engine_sim`). Only what no setting can express is dropped here: a framework the
estimator has no kernels for, a GPU without a preset, a model without a config, a row whose
precision cannot be told, disaggregated serving, a MoE row whose layout columns do not add
up. Each skip is counted under its reason. The sample states no KV-cache type, so every
engine keeps the default (`sim.rollout_kv_dtype` bf16); per-tensor and per-block FP8 are
both `sim.rollout_precision` fp8 (the simulator reads the block scaling from the checkpoint),
NVFP4 is fp4.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from harness.core.config import ENGINE_BACKENDS, ConfigError, RunConfig
from harness.sim.frameworks import engine_default
from harness.sim.presets import model_names, shipped_config

SAMPLE_REL = "systems/silicon_sample.csv"
GPUS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "a100_sxm": "a100-80gb-sxm",
        "b200_sxm": "b200-sxm", "b300_sxm": "b300-sxm", "gb200": "gb200"}
FRAMEWORKS = ENGINE_BACKENDS  # the frameworks whose kernels the estimator prices
BF16 = {"bf16", "fp16", "bfloat16", "float16"}
FP8 = {"fp8", "fp8_block"}  # per-tensor and per-block FP8: sim.rollout_precision "fp8"
# Served names whose shipped config has another name (an Instruct model has the base's shapes).
ALIASES = {"meta-llama/Llama-3.1-70B": "meta-llama--Meta-Llama-3.1-70B",
           "meta-llama/Llama-3.1-8B-Instruct": "meta-llama--Meta-Llama-3.1-8B"}
EXPERT_KEYS = ("num_experts", "n_routed_experts", "num_local_experts")
# Row value -> the sim field that takes it, and the value an engine has when it is unset.
SIM_FIELDS = {"precision": ("rollout_precision", "bf16"), "ep": ("rollout_ep", 1),
              "attention_dp": ("rollout_attention_dp", 1)}


def package_dir() -> Path:
    import aiconfigurator_core

    return Path(aiconfigurator_core.__file__).parent


def portable_ref(ref: str) -> str:
    """`ref` as silicon.csv stores it: a shipped config as a path inside the package
    (`aiconfigurator_core/model_configs/...`), so that a re-run on another machine (or
    another checkout) writes the same bytes; a preset name as it is."""
    base = package_dir()
    try:
        inside = Path(ref).relative_to(base)
    except ValueError:
        return ref
    return f"{base.name}/{inside.as_posix()}"


def checkpoint(raw: dict[str, Any]) -> tuple[str, str]:
    """(weights' precision: bf16 | fp8 | another method's name, dense | moe) of a config."""
    text = raw.get("text_config") or {}
    arch = "moe" if any(k in raw or k in text for k in EXPERT_KEYS) else "dense"
    quant = raw.get("quantization_config") or text.get("quantization_config") or {}
    method = str(quant.get("quant_method", "")).lower()
    if not quant:
        dtype = str(raw.get("torch_dtype") or text.get("torch_dtype") or "").lower()
        return ("bf16" if dtype in BF16 else dtype or "unknown"), arch
    return ("fp8" if method == "fp8" else method or "quantized"), arch


def model_ref(model_path: str) -> tuple[str | None, str, str, str]:
    """(sim.model, checkpoint precision, dense | moe, why not) for a served model name."""
    stem = ALIASES.get(model_path, model_path.replace("/", "--"))
    path = shipped_config(stem)
    if path.is_file():
        weights, arch = checkpoint(json.loads(path.read_text("utf-8")))
        return str(path), weights, arch, ""
    preset = model_path.split("/")[-1].lower()
    if preset in model_names():
        return preset, "bf16", "dense", ""
    return None, "", "", "no shipped config or preset"


FAMILIES = {"nvfp4": "fp4", "int4_wo": "int4"}  # one format under the sample's two names


def _family(label: str) -> str:
    return "bf16" if label in BF16 else "fp8" if label in FP8 else FAMILIES.get(label, label)


def precision(row: Any, weights: str, unlabelled_as_bf16: bool) -> tuple[str, str, str]:
    """(precision, "labelled" | "inferred", why not). The labels (precision, GEMM and MoE
    quantization) name one family (bf16, fp8 per tensor or per block, or another) or the
    row is mixed; an unlabelled row takes its checkpoint's own precision (the frameworks'
    default) unless `unlabelled_as_bf16` is False."""
    cols = [row.precision, row.gemm_quant_mode, row.moe_quant_mode]
    given = {_family(str(c).lower()) for c in cols if isinstance(c, str)}
    if not given:
        if unlabelled_as_bf16 and weights in ("bf16", "fp8"):
            return weights, "inferred", ""
        return "", "", "precision not labelled"
    if len(given) > 1:
        return "", "", "mixed precision " + "/".join(sorted(given))
    return given.pop(), "labelled", ""


def _size(value: Any) -> int:
    """A layout column as a size: empty or 0 (not used) is 1."""
    return 1 if value is None or (isinstance(value, float) and math.isnan(value)) \
        or int(value) < 1 else int(value)


def keep(row: Any, unlabelled_as_bf16: bool = True) -> tuple[dict[str, Any] | None, str]:
    """The engine a sample row describes, or (None, why it cannot be put to the
    simulator). Precision, EP, attention DP and architecture are columns, not checks."""
    if row.backend not in FRAMEWORKS:
        return None, f"framework {row.backend} (the estimator prices {', '.join(FRAMEWORKS)})"
    if row.system not in GPUS:
        return None, f"GPU {row.system} without a preset"
    ref, weights, arch, why = model_ref(row.model_path)
    if ref is None:
        return None, why
    value, basis, why = precision(row, weights, unlabelled_as_bf16)
    if not basis:
        return None, why
    if row.mode != "agg":
        return None, f"serving mode {row.mode}"
    tp, ep, dp = int(row.tp_size), _size(row.moe_ep_size), _size(row.attention_dp_size)
    moe_tp = _size(row.moe_tp_size)
    if arch == "moe" and moe_tp * ep != tp * dp:  # the experts' GPUs are the attention's
        return None, "layout: moe_tp x moe_ep != tp x attention_dp"
    return {"id": row.id, "model": row.model_path, "model_ref": ref, "gpu": GPUS[row.system],
            "framework": row.backend, "backend_version": row.backend_version,
            "precision": value, "precision_basis": basis, "arch": arch,
            "tp": tp, "ep": ep, "attention_dp": dp, "batch": int(row.batch_size),
            "isl": int(row.isl), "osl": int(row.osl), "measured_ms": row.silicon_tpot_ms,
            "measured_ttft_ms": row.silicon_ttft_ms}, ""


def engine_sim(kept: dict[str, Any], step_model: str) -> tuple[Any, str]:
    """(the `sim` settings of the row's engine, "" or the simulator's refusal): every
    setting the row asks for is set; one the simulator lacks, or one it rejects, refuses."""
    cfg = RunConfig()
    sim = cfg.sim
    sim.calibration, sim.step_model = "rolloutpipe", step_model
    sim.model, sim.rollout_gpu = kept["model_ref"], kept["gpu"]
    # The sample's tp_size is one attention-DP rank's TP (aiconfigurator's convention:
    # tp x attention_dp GPUs a replica); sim.rollout_tp counts the replica's GPUs (SGLang's).
    sim.rollout_tp, sim.engine_backend = kept["tp"] * kept["attention_dp"], kept["framework"]
    for key, (field, unset) in SIM_FIELDS.items():
        if hasattr(sim, field):
            setattr(sim, field, kept[key])
        elif kept[key] != unset:
            return sim, f"no sim.{field} ({key} {kept[key]})"
    try:
        cfg.validate()
    except ConfigError as err:
        return sim, f"settings: {err}"
    # The served engine's own running cap (vLLM's max_num_seqs, SGLang's), not the default
    # system's (slime's client keeps 512 in flight): the sample's engines were served alone.
    sim.max_running = engine_default(cfg, None)[0]
    return sim, ""
