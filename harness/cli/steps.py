"""`rolloutbench steps`: the engine step times the simulator assumes."""

from __future__ import annotations

import textwrap
from typing import Annotated

import typer

from harness.cli.common import CSV_HELP, JSON_HELP, console, fail, output_format, print_rows
from harness.core.config import (
    ENGINE_BACKENDS,
    PRECISIONS,
    STEP_MODELS,
    WEIGHT_PRECISIONS,
    ConfigError,
    SimConfig,
    check_spec,
)
from harness.core.fields import need

D = SimConfig()  # the options' defaults: a default run's engine

commands = typer.Typer()  # added to the app in harness/cli/app.py

BATCHES = "1,2,4,8,16,32,64,128,256,512"
CONTEXTS = "512,2048,8192,32768"


def int_list(text: str, option: str) -> list[int]:
    """'1,2,4' as integers, each >= 1; one line naming the option otherwise."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        fail(f"{option}: expected comma-separated integers, got {text!r}")
    if not values or min(values) < 1:
        fail(f"{option}: expected integers >= 1, got {text!r}")
    return values


# The sim fields this command sets, by the option that sets them.
OPTIONS = {"sim.model": "--model", "sim.rollout_gpu": "--gpu", "sim.rollout_tp": "--tp",
           "sim.engine_backend": "--backend", "sim.rollout_ep": "--ep",
           "sim.rollout_attention_dp": "--attention-dp", "sim.rollout_precision": "--precision",
           "sim.rollout_kv_dtype": "--kv-dtype", "sim.calibration": "--calibration",
           "sim.step_model": "--step-model", "sim.engine_eager": "--eager",
           "sim.spec_drafter": "--spec", "sim.spec_tokens": "--spec-tokens",
           "sim.spec_acceptance": "--spec-acceptance",
           "sim.spec_draft_model": "--spec-draft-model"}


def _named(text: str, otherwise: str = "") -> str:
    """An error about a sim field named by this command's option for it (`sim.model: x`
    is `--model: x`); one about no field opens with `otherwise`."""
    field, sep, rest = text.partition(": ")
    if sep and field in OPTIONS:
        return f"{OPTIONS[field]}: {rest}"
    return f"{otherwise}: {text}" if otherwise else text


def _flag(field: str, value: str) -> str:
    """A sim field's setting in this command's words (`--backend vllm`)."""
    return f"{OPTIONS[field]} {value}"


@commands.command("steps")
def steps_cmd(
    model: Annotated[str, typer.Option(help="Model preset, or the path of a Hugging Face "
                                            "config.json (or its folder).")] = D.model,
    gpu: Annotated[str, typer.Option(help="GPU preset.")] = D.rollout_gpu,
    tp: Annotated[int, typer.Option(help="Tensor-parallel size of the replica.")]
    = D.rollout_tp,
    backend: Annotated[str, typer.Option(help="Serving framework: sglang or vllm.")]
    = D.engine_backend,
    ep: Annotated[int, typer.Option(help="Expert-parallel size of the replica (MoE models; "
                                         "divides --tp).")] = D.rollout_ep,
    attention_dp: Annotated[int, typer.Option(help="Attention data-parallel ranks (MoE "
                                                   "models; divides --tp).")]
    = D.rollout_attention_dp,
    precision: Annotated[str, typer.Option(help="Rollout weights and matmuls: bf16, fp8 or "
                                                "fp4 (NVFP4, Blackwell).")]
    = D.rollout_precision,
    kv_dtype: Annotated[str, typer.Option(help="KV-cache element type: bf16 or fp8.")]
    = D.rollout_kv_dtype,
    step_model: Annotated[str, typer.Option(help="kernels or roofline.")] = D.step_model,
    eager: Annotated[bool, typer.Option(
        "--eager", help="Decode steps without CUDA graphs (sim.engine_eager; dense BF16 "
                        "models).")] = D.engine_eager,
    calibration: Annotated[str, typer.Option(
        help="roofline: the calibration its efficiencies come from.")] = D.calibration,
    spec: Annotated[str, typer.Option(
        help="Speculative decoding's drafter (sim.spec_drafter): off, draft, mtp or ngram; "
             "on, a speculative step is shown beside the plain one.")] = D.spec_drafter,
    spec_tokens: Annotated[int, typer.Option(help="Tokens drafted a step, k.")]
    = D.spec_tokens,
    spec_acceptance: Annotated[float, typer.Option(
        help="Chance a drafted token is accepted, alpha.")] = D.spec_acceptance,
    spec_draft_model: Annotated[str, typer.Option(help="--spec draft: the draft model.")]
    = D.spec_draft_model,
    batch: Annotated[str, typer.Option(help="Running sequences of a decode step.")] = BATCHES,
    context: Annotated[str, typer.Option(
        help="Tokens each sequence holds (decode), or prompt tokens (prefill).")] = CONTEXTS,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    csv_out: Annotated[bool, typer.Option("--csv", help=CSV_HELP)] = False,
) -> None:
    """The engine the simulator assumes: one decode step of BATCH sequences holding
    CONTEXT tokens each, and the prefill of one CONTEXT-token prompt, in ms, with where
    each number comes from (measured kernels, a stand-in GPU, or the roofline). The
    defaults are a default run's engine (`run`'s sim settings)."""
    from harness.core.config import RunConfig
    from harness.core.registry import UnknownName
    from harness.sim.calibration import resolve
    from harness.sim.engine_spec import engine_of
    from harness.sim.feasibility import engine_problem, splits
    from harness.sim.kernels.source import cannot_model, ways_on
    from harness.sim.presets import load_hardware, load_model
    from harness.studies.steps import step_rows, unheld

    fmt = output_format(json_out, csv_out)
    batches, contexts = int_list(batch, "--batch"), int_list(context, "--context")
    if tp < 1:
        fail(f"--tp: must be >= 1, got {tp}")
    if backend not in ENGINE_BACKENDS:
        fail(f"--backend: must be {' or '.join(ENGINE_BACKENDS)}, got {backend!r}")
    if step_model not in STEP_MODELS:
        fail(f"--step-model: must be {' or '.join(STEP_MODELS)}, got {step_model!r}")
    for option, value, allowed in (("--precision", precision, WEIGHT_PRECISIONS),
                                   ("--kv-dtype", kv_dtype, PRECISIONS)):
        if value not in allowed:
            fail(f"{option}: must be {' or '.join(allowed)}, got {value!r}")
    cfg = RunConfig()
    s = cfg.sim
    s.model, s.rollout_gpu, s.rollout_tp, s.engine_backend = model, gpu, tp, backend
    s.rollout_ep, s.rollout_precision, s.rollout_kv_dtype = ep, precision, kv_dtype
    s.rollout_attention_dp = attention_dp
    s.step_model, s.calibration, s.engine_eager = step_model, calibration, eager
    s.spec_drafter, s.spec_tokens, s.spec_acceptance = spec, spec_tokens, spec_acceptance
    s.spec_draft_model = spec_draft_model
    for option, load, name in (("--model", load_model, model), ("--gpu", load_hardware, gpu)):
        try:  # named as `run` names them (the lookup's own line named no option)
            load(name)
        except UnknownName as err:
            fail(f"{option} {name}: {err}")
        except (OSError, ValueError) as err:  # a model's config.json that is not one
            fail(_named(str(err), option))
    try:
        check_spec(s, need)
    except ConfigError as err:  # `--set sim.spec_tokens: ...` in this command's words
        fail(_named(str(err).removeprefix("--set ")))
    from harness.run.knob_check import unread_spec

    for field, why, fix in unread_spec(s):  # `--spec off --spec-tokens 5` ran plain, silently
        why = why.replace("sim.spec_drafter", "--spec").replace("spec_drafter=", "--spec ")
        fail(f"{OPTIONS[f'sim.{field}']} {getattr(s, field)}: {why}; drop it or {fix}")
    try:
        resolve(s)
    except (OSError, ValueError) as err:  # a bad --model file is the model's, not --calibration's
        fail(_named(str(err), "--calibration"))
    try:
        spec = engine_of(s)
        if not splits(spec.model, spec.attention_tp):  # the kernels' own words named --model
            fail(f"--tp {tp}: {engine_problem(spec, s.mem_fraction)}")
        alone, over = unheld(s, batches, contexts)
        if alone:  # not one sequence fits: there is no step to price
            fail(alone[0])
        rows = step_rows(s, batches, contexts)
    except ConfigError as err:  # the engine's refusal, named by this command's flags
        hint = (ways_on(s, _flag, batches[0], contexts[0]) if cannot_model(err)
                else "")  # not a layout's refusal
        fail(_named(str(err)) + hint)
    for line in over:  # said before the table, on stderr: the numbers stand, flagged
        typer.echo(textwrap.fill(f"warning: {line}", 100, subsequent_indent="  ",
                                 break_on_hyphens=False), err=True)
    if rows and str(rows[0]["step_source"]).startswith("kernels"):
        from harness.sim.kernels.source import framework_overhead

        term = framework_overhead(engine_of(s))
        kernels = ("max(measured kernels + launch gaps, the layers' host calls)" if eager
                   else "measured kernels")
        typer.echo(textwrap.fill(f"note: decode_ms = {kernels} + the framework's own "
                                 f"per-step cost: {term.provenance}", 100,
                                 subsequent_indent="  "), err=True)
    print_rows(rows, fmt)


@commands.command("presets")
def presets_cmd(
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    csv_out: Annotated[bool, typer.Option("--csv", help=CSV_HELP)] = False,
) -> None:
    """Every model and GPU preset the simulator knows, with its figures and where they
    come from (`--set sim.model=NAME`, `sim.rollout_gpu`, `sim.trainer_gpu`; names match
    without regard to case). A model may also be a Hugging Face config.json path."""
    from dataclasses import asdict

    from harness.cli.tables import Column, build, emit
    from harness.sim.presets import (
        hardware_names,
        load_hardware,
        load_model,
        model_names,
        model_row,
    )

    fmt = output_format(json_out, csv_out)
    # One set of names: a row holds the fields a presets file takes (so a row copied into
    # `[gpus.NAME]` / `[models.NAME]` loads), plus its kind and name; derived figures
    # (weights_gb) are for the table only.
    models = [{"kind": "model", "preset": n, **model_row(load_model(n))} for n in model_names()]
    gpus = [{"kind": "gpu", "preset": n, **asdict(load_hardware(n))} for n in hardware_names()]
    if fmt != "table":
        emit(console, [*models, *gpus], fmt, lambda rows: build(rows, []))
        return
    models = [{**r, "weights_gb": r["params_b"] * 2} for r in models]  # BF16: 2 B a weight
    emit(console, models, fmt, lambda rows: build(rows, (
        Column("preset", "model", "text"), Column("params_b", "params B", "sig"),
        Column("layers", "layers", "int"), Column("heads", "heads", "int"),
        Column("kv_heads", "KV heads", "int"), Column("weights_gb", "bf16 GB"),
        Column("source", "source", "text")), lift=()))
    emit(console, gpus, fmt, lambda rows: build(rows, (
        Column("preset", "GPU", "text"), Column("memory_gb", "GB", "int"),
        Column("hbm_bandwidth_gbs", "HBM GB/s", "int"), Column("bf16_tflops", "BF16 TF", "sig"),
        Column("link", "link", "text"), Column("link_bandwidth_gbs", "link GB/s", "int"),
        Column("source", "source", "text")), lift=()))
