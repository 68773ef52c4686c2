"""The live commands of `rolloutbench`: datasets, the tiny model, the live demo,
validation against the simulator, and which backends this machine can run."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from harness.cli import app, build_config, console, fail, print_metrics, print_rows
from harness.config import ConfigError
from harness.registry import UnknownName, unknown_name


@app.command("backends")
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
app.add_typer(data_app, name="data")


@data_app.command("check")
def data_check_cmd(
    workload: Annotated[str, typer.Option(
        help="lsat-ar, agieval-math, sci-xw, sci-jl or olyphys.")],
    data_dir: Annotated[Path, typer.Option(
        help="A root laid out like shared/data (agieval/, scibench/, olympiadbench/).")],
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
        keys = ("workload", "count", "reference_ok", "example")
        sys.stdout.write(json.dumps({k: result[k] for k in keys}, indent=2) + "\n")
        return
    console.print(f"[bold]{workload}[/bold]: {result['count']} problems, "
                  f"{result['reference_ok']} reference answers pass their verifier",
                  highlight=False)
    console.print(result["example"], highlight=False)
    for failure in result["failures"]:
        console.print(f"  fails: {failure}", highlight=False)


model_app = typer.Typer(help="The tiny live model, built locally (no downloads).",
                        no_args_is_help=True)
app.add_typer(model_app, name="model")


@model_app.command("init")
def model_init_cmd(
    out: Annotated[Path, typer.Argument(help="Folder for the model and its tokenizer.")],
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    force: Annotated[bool, typer.Option(help="Rebuild even if the folder holds a model.")]
    = False,
) -> None:
    """Build a tiny Qwen3-architecture model and train its tokenizer (cached)."""
    try:
        from harness.live.model import init_model
    except ImportError as err:
        fail(f"model init needs the live extras (make setup-live): {err}")
    try:
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
    try:
        from harness.live.model import arith_examples, warmup
    except ImportError as err:
        fail(f"model warmup needs the live extras (make setup-live): {err}")
    try:
        result = warmup(model_dir, arith_examples(examples, seed), steps=steps, seed=seed)
    except (FileNotFoundError, ValueError) as err:
        fail(str(err))
    console.print_json(json.dumps(result, default=str))


@app.command("validate")
def validate_cmd(
    systems: Annotated[str, typer.Option(help="Comma-separated systems.")]
    = "slime,cgp,cgp-fgd",
    out: Annotated[Path, typer.Option(help="Folder for traces and validate.csv.")]
    = Path("runs/validate"),
    model_dir: Annotated[Path, typer.Option(help="The live model (model init + warmup).")]
    = Path("runs/live-demo/model"),
    groups: Annotated[int, typer.Option("--groups", "-R")] = 8,
    group_size: Annotated[int, typer.Option("--group-size", "-K")] = 4,
    update_groups: Annotated[int, typer.Option("--update-groups", "-U")] = 2,
    rounds: Annotated[int, typer.Option()] = 2,
    seed: Annotated[int, typer.Option()] = 0,
    ray_address: Annotated[str, typer.Option(
        help="Live: 'local' (Ray actors here; simulated with the cpu-live-ray calibration), "
             "'off' (one process; cpu-live), or HOST:PORT.")] = "local",
) -> None:
    """Run systems live and on the simulator (this machine's measured calibration)."""
    from harness.sim.calibration import path_of

    needed = "cpu-live" if ray_address == "off" else "cpu-live-ray"
    if not path_of(needed).exists():
        fail(f"no {needed} calibration: run rolloutbench calibrate engine first")
    try:
        base = build_config(None, [], workload="arith", groups=groups, group_size=group_size,
                            update_groups=update_groups, rounds=rounds, seed=seed)
    except (ConfigError, UnknownName) as err:
        fail(str(err))
    base.max_response_tokens = 48
    base.live.model_dir = str(model_dir)
    base.live.ray_address = ray_address
    from harness.live.validate import validate

    df = validate([x.strip() for x in systems.split(",")], base, out)
    print_rows(df.to_dict("records"))
    console.print(f"median relative error {df['rel_error'].median():.1%} "
                  f"({out / 'validate.csv'})", highlight=False)


@app.command("live-demo")
def live_demo_cmd(
    out: Annotated[Path, typer.Option(help="Folder for the model, traces, table, figure.")]
    = Path("runs/live-demo"),
    rounds: Annotated[int, typer.Option(help="Live rounds per system.")] = 2,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
) -> None:
    """Every system live on the tiny warmed-up model (needs `make setup-live`)."""
    from harness.live.runtime import missing_live

    missing = missing_live()
    if missing:
        fail(f"live-demo needs {', '.join(missing)}: run make setup-live")
    from harness.live import demo

    df = demo.run(out, seed=seed, rounds=rounds)
    print_metrics(df.to_dict("records"))
    console.print(f"traces, metrics.csv and live_demo.png in {out}", highlight=False)


