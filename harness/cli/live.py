"""The live commands of `rolloutbench`: datasets, the tiny model, the live demo,
validation against the simulator, and which backends this machine can run."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import (
    CSV_HELP,
    JSON_HELP,
    build_config,
    console,
    fail,
    kill_as_ctrl_c,
    output_format,
    print_metrics,
    refuse_overwrite,
    shown,
    workload_file,
)
from harness.core.config import ConfigError, RunConfig
from harness.core.registry import UnknownName, unknown_name
from harness.shared.ray_connect import HELP as RAY_HELP

commands = typer.Typer()  # added to the app in harness/cli/app.py


@commands.command("backends")
def backends_cmd() -> None:
    """Engines, trainers and orchestration, and whether this machine can run them.
    Choose with --set live.engine=..., live.trainer=..., --ray-address."""
    from harness.live.backends import BACKENDS

    for b in BACKENDS:
        mark = "available" if b.available() else "missing"
        if b.gpu_only and mark == "missing":
            mark = "gpu-only"
        console.print(f"{b.kind:14} {b.name:10} {mark:10} {b.what}", highlight=False)


data_app = typer.Typer(help="Real benchmark datasets: loaders and verifiers.",
                       no_args_is_help=True)
commands.add_typer(data_app, name="data")


@data_app.command("check")
def data_check_cmd(
    workload: Annotated[str, typer.Option(
        help="lsat-ar, agieval-math, sci-xw, sci-jl or olyphys.")],
    data_dir: Annotated[Path, typer.Option(
        help="The folder you downloaded the published sets to (none ship with "
             "rolloutbench): agieval/lsat-ar.jsonl and math.jsonl, scibench/BOOK.json, "
             "olympiadbench/English_Olympiad_Physics.json (or OE_TO_physics_en_COMP.json).")],
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON object.")] = False,
) -> None:
    """Load a dataset, show one example, and score every reference answer with the
    set's own verifier (each must pass, or the failure is listed with its reason)."""
    from workloads.check import check
    from workloads.datasets import WORKLOADS, DatasetError

    if workload not in WORKLOADS:
        fail(str(unknown_name("dataset workload", workload, list(WORKLOADS))))
    try:
        result = check(workload, data_dir)
    except (DatasetError, ImportError) as err:
        fail(str(err))
    if json_out:
        keys = ("workload", "count", "reference_ok", "example", "file", "read", "dropped")
        sys.stdout.write(json.dumps({k: result[k] for k in keys if k in result}, indent=2)
                         + "\n")
        return
    console.print(f"[bold]{workload}[/bold]: {result['count']} problems, "
                  f"{result['reference_ok']} reference answers pass their verifier",
                  highlight=False)
    if "dropped" in result:  # olyphys keeps only the problems a verifier can score
        dropped = ", ".join(f"{n} {why}" for why, n in result["dropped"].items()) or "none"
        console.print(f"  read {result['read']} records from {result['file']}; dropped: "
                      f"{dropped}", highlight=False)
    console.print(result["example"], highlight=False)
    for failure in result["failures"]:
        console.print(f"  fails: {failure}", highlight=False)


model_app = typer.Typer(help="The tiny live model, built locally (no downloads).",
                        no_args_is_help=True)
commands.add_typer(model_app, name="model")


def _needs(command: str, *packages: str) -> None:
    """One line and exit 2 where `command`'s packages are missing, before any work (they
    are imported late: a traceback from deep in the model code said so instead)."""
    from harness.live.runtime import missing

    lacking = missing(*packages)
    if lacking:
        fail(f"{command} needs {', '.join(lacking)}: run make setup-live")


@model_app.command("init")
def model_init_cmd(
    out: Annotated[Path, typer.Argument(help="Folder for the model and its tokenizer.")],
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    force: Annotated[bool, typer.Option(help="Rebuild even if the folder holds a model.")]
    = False,
) -> None:
    """Build a tiny Qwen3-architecture model and train its tokenizer (cached)."""
    _needs("model init", "torch", "transformers", "tokenizers")
    from harness.core.progress import stage
    from harness.live.logs import quiet_bars
    from harness.live.model import init_model
    from harness.run.out_folder import check_out

    check_out(out, "OUT")  # a file or an unmakeable folder: one line before any work
    quiet_bars()  # no checkpoint-writing bars
    try:
        with stage(f"model init: training the tokenizer and building the model in {out}"):
            path = init_model(out, seed=seed, force=force)
    except (ValueError, FileExistsError) as err:
        fail(str(err))
    console.print(f"model ready in {path}", highlight=False)


@model_app.command("warmup")
def model_warmup_cmd(
    model_dir: Annotated[Path, typer.Argument(help="A folder made by `model init`.")],
    workload: Annotated[str, typer.Option(help="Task format to warm up on.")] = "arith",
    examples: Annotated[int, typer.Option(help="Supervised examples.")] = 2000,
    steps: Annotated[int, typer.Option(help="Optimizer steps.")] = 200,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
) -> None:
    """A short supervised warm-up on the task format, so live rewards are not all zero."""
    if workload != "arith":
        fail(f"--workload: warm-up knows the arith format only, not {workload!r}")
    _needs("model warmup", "torch", "transformers")
    from harness.core.progress import Bar
    from harness.live.logs import quiet_bars
    from harness.live.model import arith_examples, warmup
    from harness.run.checks import check_model_dir

    check_model_dir(model_dir, "MODEL_DIR")  # not a model: one line before any work
    quiet_bars()  # no checkpoint-reading and -writing bars
    try:
        with Bar(f"model warmup: {steps} optimizer steps on {examples} examples",
                 steps) as bar:
            result = warmup(model_dir, arith_examples(examples, seed), steps=steps, seed=seed,
                            on_step=lambda _step: bar.advance())
    except (FileNotFoundError, ValueError) as err:
        fail(str(err))
    console.print_json(json.dumps(result, default=str))


VALIDATE_SYSTEMS = "slime,cgp,cgp-fgd"


def _typed(ctx: typer.Context, sets: list[str]) -> set[str]:
    """The config fields the user gave on the command line (an option not left at its
    default, a --set): a U typed asks for that many groups per update."""
    given = {p.name for p in ctx.command.params if p.name is not None
             and (source := ctx.get_parameter_source(p.name)) is not None
             and source.name != "DEFAULT"}
    return given | {a.split("=", 1)[0].strip() for a in sets}


def validate_defaults(model_dir: Path, ray_address: str = "off") -> RunConfig:
    """What `validate` runs unless told otherwise: the LSAT-AR-shaped live profile,
    replayed, one round of 8 groups of 4, in one process; on two cores or more the
    engine core on its own cores (`live.trainer_cores = 1`), as the simulator has
    the engine and the trainer on separate devices."""
    from harness.live.cores import usable_cores

    cfg = RunConfig(workload="lsat-ar-live", groups=8, group_size=4, update_groups=2,
                    rounds=1, runtime="live")
    cfg.live.lengths, cfg.live.max_model_len, cfg.live.ray_address = "replay", 2048, "off"
    cfg.live.model_dir = str(model_dir)
    if ray_address == "off" and len(usable_cores()) >= 2:
        cfg.live.trainer_cores = 1
    return cfg


def _refuse_unread(ctx: typer.Context, reads: tuple[str, ...], message: str) -> None:
    """One line naming the first option given that this kind of validation does not read
    (`message` with the option in its {}), before any work."""
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name)
        if param.name not in ("what", *reads) and source is not None and \
                source.name != "DEFAULT":
            fail(message.format(param.opts[0]))


def _validate_scale(ctx: typer.Context, out: Path | None, claims: Path, force: bool) -> None:
    """`validate scale`: refuse options it does not read and a missing claims table before
    any work, then write the table."""
    from harness.run.out_folder import refuse_existing_run
    from harness.studies.validate.scale import validate_scale

    _refuse_unread(ctx, ("out", "force", "claims"), "validate scale: {} does not apply to "
                   "validate scale")
    if not claims.is_file():
        fail(f"validate scale: --claims {claims}: no such file (make reproduce writes it)")
    target = out or Path("results/validation/scale")
    try:
        refuse_existing_run(target, force, ("scale.md",), "a scale validation")
    except ConfigError as err:
        fail(str(err))
    text = validate_scale(target, claims, log=lambda m: typer.echo(m, err=True))
    console.print(text, markup=False, highlight=False)


@commands.command("validate")
def validate_cmd(
    ctx: typer.Context,
    what: Annotated[str, typer.Argument(
        help="live: systems run live against their simulated twins; gpu: the simulated "
             "GPU step against measured GPU latencies and kernels (no live engine); scale: "
             "every external GPU measurement in one table, fitted rows apart.")]
    = "live",
    out: Annotated[Path | None, typer.Option(
        help="Folder for traces, tables and the figures; one that holds a validation "
             "already needs --force." + shown("runs/validate; gpu: results/validation/gpu; "
                                              "scale: results/validation/scale"))]
    = None,
    claims: Annotated[Path, typer.Option(
        help="scale: the claims table whose verl and AReaL rows it reads (make reproduce "
             "writes it).")] = Path("results/claims.csv"),
    systems: Annotated[str, typer.Option(
        help="Comma-separated systems, one cell each (ignored with --grid).")]
    = VALIDATE_SYSTEMS,
    grid: Annotated[Path | None, typer.Option(
        help="A validation grid file (see sweeps/validation.toml); the run options "
             "below are ignored.")] = None,
    calibration: Annotated[Path | None, typer.Option(
        help="A calibration file to simulate with."
             + shown("none: this machine's engine and trainer measured first"))] = None,
    model_dir: Annotated[Path, typer.Option(help="The live model (rolloutbench model init).")]
    = Path("runs/live-model"),
    workload: Annotated[str, typer.Option(help="A profile or trace:PATH.")] = "lsat-ar-live",
    groups: Annotated[int, typer.Option("--groups", "-R", help="Groups per rollout R.")] = 8,
    group_size: Annotated[int, typer.Option("--group-size", "-K",
                                            help="Samples per prompt K.")] = 4,
    update_groups: Annotated[int, typer.Option("--update-groups", "-U",
                                               help="Groups per update U.")] = 2,
    frontier: Annotated[int | None, typer.Option(
        help="cgp-fgd: frontier width F_w." + shown(RunConfig().frontier))] = None,
    rounds: Annotated[int, typer.Option(help="Rollout rounds.")] = 1,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    ray_address: Annotated[str, typer.Option(
        help="'off': one process, one engine lent to every cell (on 2+ cores the engine "
             "core on its own: live.trainer_cores=1); 'local' or HOST:PORT: Ray actors, an "
             f"engine per cell. {RAY_HELP}")] = "off",
    config: Annotated[Path | None, typer.Option(help="TOML file with any config fields.")]
    = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="Override: section.field=value (e.g. live.lengths=model)")] = None,
    json_out: Annotated[bool, typer.Option(
        "--json", help="Print the summary as JSON (progress goes to stderr).")] = False,
    csv_out: Annotated[bool, typer.Option(
        "--csv", help="Print OUT/validate.csv, one row per cell and metric.")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Overwrite the validation already in OUT.")] = False,
) -> None:
    """Run systems live (responses replayed to the workload's lengths) and on the
    simulator with this machine's calibration, measured first; compare them. With
    `gpu`: both step models against aiconfigurator-core's measured serving latencies,
    the roofline against the measured kernels for every preset, and PipelineRL's
    Appendix A with a measured GEMM utilisation."""
    from harness.live.runtime import missing_live
    from harness.run.knob_check import ignored_line
    from harness.run.out_folder import refuse_existing_run
    from harness.studies.validate.grid import Cell, load_grid

    fmt = output_format(json_out, csv_out)
    kill_as_ctrl_c()
    if what not in ("live", "gpu", "scale"):
        fail(f"validate: expected live, gpu or scale, got {what!r}")
    if what == "scale":
        _validate_scale(ctx, out, claims, force)
        return
    if what == "gpu":
        from harness.studies.validate.gpu.run import validate_gpu

        _refuse_unread(ctx, ("out", "force", "json_out"),  # what gpu reads
                       "validate gpu: {} does not apply to validate gpu")

        target = out or Path("results/validation/gpu")
        try:
            refuse_existing_run(target, force, ("summary.md",), "a GPU validation")
        except ConfigError as err:
            fail(str(err))
        text = validate_gpu(target, log=lambda m: typer.echo(m, err=True))
        console.print(text, markup=False, highlight=False)
        return
    out = out or Path("runs/validate")
    refuse_overwrite("--out", out, [("--grid", grid), ("--calibration", calibration),
                                    ("--config", config), ("--workload", workload_file(workload))],
                     ("",))  # the folder: traces, tables, calibration.toml, figures
    try:
        refuse_existing_run(out, force, ("validate.csv",), "a validation")
    except ConfigError as err:
        fail(str(err))
    missing = missing_live()
    if missing:
        fail(f"validate needs {', '.join(missing)}: run make setup-live")
    if calibration is not None and not calibration.is_file():
        fail(f"--calibration: no file {calibration}")
    from harness.run.checks import check_model_dir

    check_model_dir(model_dir, "--model-dir")  # its ConfigError: one line, exit 2
    try:
        if grid is not None:
            cells = load_grid(grid)
            for cell in cells:
                cell.config.live.model_dir = str(model_dir)
                build_config(None, [], start=cell.config)
        else:
            cells = []
            for system in [x.strip() for x in systems.split(",") if x.strip()]:
                start = validate_defaults(model_dir, ray_address)
                cfg = build_config(config, set_ or [], start=start, shared=True,
                                   system=system, workload=workload, groups=groups,
                                   group_size=group_size, update_groups=update_groups,
                                   frontier=frontier, rounds=rounds, seed=seed,
                                   ray_address=ray_address)
                cells.append(Cell(f"{workload} R={groups}", system, cfg))
    except (ConfigError, UnknownName) as err:
        fail(str(err))
    ignored = ignored_line((c.config for c in cells), _typed(ctx, set_ or []),
                           named={"update_groups": "--update-groups", "frontier": "--frontier"})
    if ignored:  # a shared option applies where read; said once, not refused
        typer.echo(f"note: {ignored}", err=True)
    from harness.run.out_folder import check_out
    from harness.studies.validate.run import validate

    check_out(out)  # a file, or unmakeable: one line before any work
    # progress: stderr, stdout is the summary's
    result = validate(cells, out, calibration, lambda m: typer.echo(m, err=True))
    if fmt == "json":
        sys.stdout.write(json.dumps(result, indent=2, default=str) + "\n")
        return
    if fmt == "csv":
        sys.stdout.write((out / "validate.csv").read_text())
        return
    console.print((out / "summary.md").read_text(), highlight=False)
    console.print(f"tables, traces and validation.png in {out} "
                  f"(median error {result['median_rel_error']:.1%})", highlight=False)


@commands.command("live-demo")
def live_demo_cmd(
    out: Annotated[Path, typer.Option(help="Folder for the model, traces, table, figure; "
                                      "one that holds a demo already needs --force.")]
    = Path("runs/live-demo"),
    rounds: Annotated[int, typer.Option(help="Live rounds per system.")] = 2,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    csv_out: Annotated[bool, typer.Option("--csv", help=CSV_HELP)] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Overwrite the demo already in OUT (its model is kept).")] = False,
) -> None:
    """Six systems live on a real engine and trainer, each response replayed to the
    length LSAT-AR's long tail assigns it: slime, cgp, cgp-fgd, pipelinerl, april
    and rollpacker (needs `make setup-live`; a few minutes). Not run: verl, whose point is
    colocation (one live engine and trainer do not share memory, so it would run as
    slime), cgp-april and cgp-tail, combinations of the six, and the asynchronous
    systems areal, verl-fully-async, verl-one-step-off, slime-async, skyrl-async,
    prime-rl, nemo-rl-async, tinker, roll-flash, sortedrl and seer, which have live
    tests of their own, verl-dynamic, tested live too, which runs there as
    verl-fully-async (the live trainer lends no GPUs), tlt, whose speculation the live
    engines do not have (it would run as slime), and laminar, which runs live with
    in-flight updates (one live engine: no relay, no repack);
    run any of them with `rolloutbench run --runtime live --system NAME`."""
    from harness.live.runtime import missing_live
    from harness.run.out_folder import refuse_existing_run

    fmt = output_format(json_out, csv_out)
    try:
        refuse_existing_run(out, force, ("metrics.csv",), "a live demo")
    except ConfigError as err:
        fail(str(err))
    missing = missing_live()
    if missing:
        fail(f"live-demo needs {', '.join(missing)}: run make setup-live")
    if rounds < 1:
        fail("--rounds: must be a positive integer")
    from harness.run.out_folder import check_out

    check_out(out)  # a file, or a folder that cannot be made: one line before any work
    from harness.studies import demo

    df = demo.run(out, seed=seed, rounds=rounds)
    print_metrics(df.to_dict("records"), fmt)
    if fmt == "table":
        console.print(f"traces, metrics.csv and live_demo.png in {out}", highlight=False)


