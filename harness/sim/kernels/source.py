"""Which step model prices a run's engine, and the words that say so (`step_source`).

`sim.step_model = "kernels"` (the default) uses the measured-kernel table wherever the
database covers the GPU preset (directly or through a documented stand-in, see
presets/kernel_gpus.toml) and the serving framework; elsewhere the roofline prices the
step, and the run says so once. `"roofline"` always uses the roofline. An engine whose
dense GEMMs are priced from another table than its own dtype's (vLLM's block-FP8:
`estimator.EAGER_GEMMS`) says so at the end: `...:dense-fp8_block-as-fp8`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from harness.core.config import ENGINE_BACKENDS, ConfigError
from harness.sim.engine_spec import EngineSpec, engine_of
from harness.sim.kernels import table as tables
from harness.sim.kernels.eager import EagerStep, allreduce_host_us, refusal
from harness.sim.kernels.estimator import (
    Estimator,
    KernelError,
    backend_version,
    config_dir,
    gemm_dtypes,
    gemm_note,
    package_version,
    reason,
    systems_with,
)
from harness.sim.kernels.gpus import KernelGpu, kernel_gpu
from harness.sim.kernels.overhead import MAX_BATCH, Overhead, charged
from harness.sim.model_config import config_file, is_config_path, preset_config
from harness.sim.perf import DecodeModel, StepJump, TableDecodeModel
from harness.sim.presets import load_model

ROOFLINE = "roofline"
_tables: dict[EngineSpec, tables.StepTable] = {}


def uncovered(gpu: str, backend: str) -> str | None:
    """Why the database cannot price this engine (None: it can)."""
    kg = kernel_gpu(gpu)
    if kg is None:
        return f"no measured kernels for {gpu}"
    if backend_version(kg.system, backend) is None:
        return f"no measured {backend} kernels on {kg.system} (for {gpu})"
    return None


def _config_text(model: str) -> str:
    if is_config_path(model):
        load_model(model)  # a file that is no model: one line (ModelConfigError)
        return json.dumps(json.loads(config_file(model).read_text("utf-8")), sort_keys=True)
    return json.dumps(preset_config(load_model(model)), sort_keys=True)


def step_table(spec: EngineSpec,
               progress: Callable[[int, int], None] | None = None) -> tables.StepTable:
    """The kept table of this engine, built (and cached) when none is kept."""
    if spec not in _tables:
        meta, key, text = identity(spec)
        found = tables.find(meta, key)
        if found is None:
            found = build(spec, progress)
            tables.save(found, tables.cache_root() / "kernels")
        _tables[spec] = found
    return _tables[spec]


def identity(spec: EngineSpec) -> tuple[dict[str, str | int | float], str, str]:
    """(meta, key, config text) of an engine's table: what it depends on, and its hash. A
    dense BF16 replica's meta names no layout, so its tables keep the keys they had."""
    kg = kernel_gpu(spec.gpu_name)
    version = backend_version(kg.system, spec.backend) if kg else None
    if kg is None or version is None:
        raise KernelError(f"--gpu: {uncovered(spec.gpu_name, spec.backend)}")
    asked = spec.estimator_kwargs().get("gemm_quant_mode")
    if asked == "nvfp4" and asked not in gemm_dtypes(kg.system, spec.backend, version):
        head = (f"sim.rollout_precision: fp4: {spec.gpu_name} has no measured NVFP4 GEMMs "
                f"({spec.backend}); ")
        raise KernelError(head + _where(systems_with(spec.backend, asked), 93 - len(head)))
    text = _config_text(spec.model_name)
    meta: dict[str, str | int | float] = {
        "model": spec.model.name, "gpu": kg.preset, "system": kg.system,
        "backend": spec.backend, "version": version, "tp": spec.tp,
        "decode_scale": kg.decode_scale, "prefill_scale": kg.prefill_scale, "comm": kg.comm,
        "package": f"aiconfigurator-core {package_version()}", **spec.layout()}
    if gemm_note(spec):  # dense GEMMs from another table (estimator.EAGER_GEMMS)
        meta["dense_gemm"] = gemm_note(spec).removeprefix(":")
    return meta, tables.table_key(meta, text), text


def estimator(spec: EngineSpec) -> Estimator:
    """The estimator of one engine replica, handed the model's config as a local folder."""
    meta, _, text = identity(spec)
    kg = kernel_gpu(spec.gpu_name)
    assert kg is not None  # identity said so
    return Estimator(spec, kg, str(meta["version"]),
                     config_dir(json.loads(text), tables.cache_root() / "kernels"))


def build(spec: EngineSpec,
          progress: Callable[[int, int], None] | None = None) -> tables.StepTable:
    """Ask the estimator for this engine's grid and fit the form (nothing is written)."""
    meta, key, _ = identity(spec)
    kg = kernel_gpu(spec.gpu_name)
    assert kg is not None  # identity said so
    source = label(kg, spec.backend, str(meta["version"]))
    source += gemm_note(spec)
    est = estimator(spec)
    try:
        return tables.build(key, meta, source, est.decode_ms, est.prefill_ms, progress)
    except tables.TableFitError as err:
        raise KernelError(f"sim.model: {spec.describe()} on {kg.system}: {err}") from None
    except Exception as err:  # the estimator's own errors, e.g. no attention data for a shape
        raise KernelError(f"sim.model: the kernel database cannot model {spec.describe()} on "
                          f"{kg.system} ({reason(err)})") from None


def describe(step_model: str, gpu: str, backend: str) -> str:
    """The step_source a run of this engine records, without building anything."""
    if step_model == ROOFLINE:
        return ROOFLINE
    why = uncovered(gpu, backend)
    if why is not None:
        return f"{ROOFLINE} ({why})"
    kg = kernel_gpu(gpu)
    assert kg is not None
    return label(kg, backend, str(backend_version(kg.system, backend)))


def step_source(sim: Any, measured: dict[str, float] | None = None) -> str:
    """What prices a run's engine: `measured` (a live engine's calibration), else
    `describe`'s answer for its step model, GPU and framework."""
    if measured is not None:
        return "measured"
    said = describe(sim.step_model, sim.rollout_gpu, sim.engine_backend)
    if said.startswith("kernels") and sim.rollout_precision != "bf16":
        said += gemm_note(engine_of(sim))  # dense GEMMs priced from another table
    if getattr(sim, "engine_eager", False):  # without CUDA graphs (kernels/eager.py)
        said = f"{said[:-1]}; eager)" if said.endswith(")") else f"{said}:eager"
    return said


def decode_model(sim: Any, params: dict[str, float], tp: int,
                 measured: dict[str, float] | None = None) -> StepJump:
    """The decode model of one engine replica of a run, as `step_source` says: a live
    engine's measured `[decode]` table, measured kernels, or the roofline at the
    calibration's efficiencies (`params`); under `sim.engine_eager` the kernels' or the
    roofline's step without CUDA graphs (kernels/eager.py)."""
    eager = getattr(sim, "engine_eager", False)
    if measured is not None and not eager:
        return DecodeModel.measured(measured)
    spec = engine_of(sim, tp)
    why = eager and refusal(spec.model, spec.precision, spec.kv_dtype, measured is not None)
    if why:  # eager over a measured table included
        raise ConfigError(why)
    if step_source(sim).startswith("kernels"):
        table = TableDecodeModel.from_table(step_table(spec))
        if eager:
            term = framework_overhead(spec)  # around the forward: charged either way
            return EagerStep.over(table, spec.model.layers, spec.tp, term.fixed_ms / 1e3,
                                  term.per_seq_ms / 1e3, MAX_BATCH, eager_allreduce_us(spec))
        return with_overhead(table, spec)
    if spec.attention_dp != 1:  # the roofline has no model of it: refuse, invent nothing
        raise ConfigError(f"sim.rollout_attention_dp: attention DP is priced by the measured "
                          f"kernels only ({step_source(sim)} would price this engine)")
    if spec.precision == "fp4":  # nor of FP4 Tensor Cores (no fp4 peak in hardware.toml)
        raise ConfigError(f"sim.rollout_precision: fp4 (NVFP4) is priced by the measured "
                          f"kernels only ({step_source(sim)} would price this engine)")
    if eager:  # the roofline's kernels, its fitted overhead around them
        roof = DecodeModel.build(spec.hw, spec.model, tp, params["bw_eff"], 0.0,
                                 params["compute_eff"], spec.bytes_per_weight,
                                 spec.bytes_per_kv)
        return EagerStep.over(roof, spec.model.layers, tp, params["step_overhead_s"],
                              allreduce_us=eager_allreduce_us(spec))
    return DecodeModel.build(spec.hw, spec.model, tp, params["bw_eff"],
                             params["step_overhead_s"], params["compute_eff"],
                             spec.bytes_per_weight, spec.bytes_per_kv)


def eager_allreduce_us(spec: EngineSpec) -> float | None:
    """The host's time per all-reduce call of this engine run eagerly, from the database's
    eager rows (its GPU's or stand-in's; None: none measured, kernels/eager.py)."""
    kg = kernel_gpu(spec.gpu_name)
    version = backend_version(kg.system, spec.backend) if kg else None
    if kg is None or version is None or spec.tp < 2:
        return None
    return allreduce_host_us(kg.system, spec.backend, version, spec.tp)


def framework_overhead(spec: EngineSpec) -> Overhead:
    """The serving framework's own cost per step this engine is charged, beyond its
    kernels (`kernels/overhead.py`; fitted to the silicon sample)."""
    kg = kernel_gpu(spec.gpu_name)
    version = backend_version(kg.system, spec.backend) if kg else None
    # Attention DP: each rank is its own engine core of attention-TP GPUs that schedules its
    # own sequences (vllm-project/vllm@624b7aff:docs/serving/data_parallel_deployment.md:13)
    return charged(spec.backend, str(version), spec.attention_tp)


def with_overhead(model: TableDecodeModel, spec: EngineSpec) -> TableDecodeModel:
    """The table's step plus the framework's term at each tabulated batch: exact between
    them too, since the term is linear in the batch (held flat past its cap, itself a
    tabulated batch) and the table's coefficients are interpolated linearly. With attention
    DP each rank's scheduler sees its share of the batch, batch / DP."""
    term = framework_overhead(spec)
    if not (term.fixed_ms or term.per_seq_ms):
        return model
    dp = spec.attention_dp
    fixed = tuple(a + term.at(b / dp if dp != 1 else b) / 1e3
                  for a, b in zip(model.fixed_s, model.batches, strict=True))
    return dataclasses.replace(model, fixed_s=fixed)


def cannot_model(err: BaseException) -> bool:
    """Whether `err` is the database's refusal of an engine (which another framework,
    precision or the roofline may price), not a layout's or a setting's."""
    return isinstance(err, KernelError) and "database cannot model" in str(err)


def priced_instead(sim: Any, batch: int = 1, context: int = 512) -> list[tuple[str, str]]:
    """(field, value) changes the kernel database can price instead of the engine it
    cannot: another framework, bf16 weights; each tried on one decode step of `batch`
    sequences of `context` tokens and one prefill of `context` tokens."""
    others = [("sim.engine_backend", b) for b in ENGINE_BACKENDS if b != sim.engine_backend]
    if sim.rollout_precision != "bf16":
        others.append(("sim.rollout_precision", "bf16"))
    found = []
    for field, value in others:
        try:
            est = estimator(engine_of(dataclasses.replace(sim, **{field[4:]: value})))
            est.decode_ms(batch, context)
            est.prefill_ms(1, context)
        except Exception:  # noqa: BLE001 - any refusal: not an alternative
            continue
        found.append((field, value))
    return found


def ways_on(sim: Any, say: Callable[[str, str], str], batch: int = 1,
            context: int = 512) -> str:
    """What to append to the database's refusal: what can price the engine instead, in
    the words of the command that refused (`say(field, value)`: `--backend vllm` for
    `steps`, `--set sim.engine_backend=vllm` for `run`); the roofline needs no database."""
    found = [say(field, value) for field, value in priced_instead(sim, batch, context)]
    can = f"{' or '.join(found)} can price it; " if found else ""
    return f"; {can}{say('sim.step_model', ROOFLINE)} needs no measured kernels"


def label(kg: KernelGpu, backend: str, version: str) -> str:
    """`kernels:<database gpu>:<framework>-<version>`, `:stand-in` for another GPU's."""
    return f"kernels:{kg.system}:{backend}-{version}" + (":stand-in" if kg.stand_in else "")


def _where(systems: list[str], room: int) -> str:
    """Which GPUs have the kernels, in `room` characters where it can: those named while
    they fit (one at least), the rest counted (a refusal fits one 100-column line)."""
    verb = " do" if len(systems) > 1 else " does"
    for shown in range(len(systems), 0, -1):
        rest = len(systems) - shown
        text = ", ".join(systems[:shown]) + (f" and {rest} more" if rest else "") + verb
        if len(text) <= room or shown == 1:
            return text
    return "no GPU has them"
