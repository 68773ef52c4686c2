"""The `rolloutbench` command line."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from harness.cli_errors import OneLineErrors
from harness.config import ConfigError, RunConfig, apply, load_toml, set_path
from harness.ray_connect import HELP as RAY_HELP
from harness.registry import UnknownName

app = typer.Typer(
    cls=OneLineErrors,  # bad input in any command: one line, exit 2
    help="Benchmark and reproduce the scheduling of LLM RL with verifiable rewards.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()
if not console.is_terminal:  # piped or captured: do not squeeze tables into 80 columns
    console = Console(width=200)


D = RunConfig()  # the defaults the run options' help shows


def shown(value: object) -> str:
    """' [default: VALUE]' for a help text, for an option whose own default (None)
    means "the config's value". The bracket is escaped: typer reads help as markup."""
    return f" \\[default: {value}]"


def fail(message: str) -> None:
    """A one-line error and exit code 2; nothing has been written yet. Plain
    text: no wrapping, no markup, so paths and brackets survive intact."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def print_metrics(rows: list[dict], fmt: str = "table") -> None:
    """Per-round metrics: a table that fits 100 columns, or every field as JSON/CSV."""
    from harness.cli_tables import emit, metrics_table

    emit(console, rows, fmt, metrics_table)


def print_rows(rows: list[dict], fmt: str = "table") -> None:
    """Any rows with the same keys: a table, or JSON/CSV."""
    from harness.cli_tables import emit, rows_table

    emit(console, rows, fmt, rows_table)


def output_format(json_out: bool, csv_out: bool) -> str:
    """'table', 'json' or 'csv'; both flags at once is a one-line error."""
    from harness.cli_tables import pick_format

    try:
        return pick_format(json_out, csv_out)
    except ValueError as err:
        fail(str(err))
    raise AssertionError  # unreachable: fail() exits


JSON_HELP = "Print the rows as JSON (every field, full precision)."
CSV_HELP = "Print the rows as CSV (every field, full precision)."


@app.command("systems")
def systems_cmd() -> None:
    """List the system backends."""
    from systems import SYSTEMS

    for name, cls in SYSTEMS.items():
        console.print(f"[bold]{name:10}[/bold] {cls.summary}", highlight=False)


@app.command("workloads")
def workloads_cmd() -> None:
    """List the workload profiles (and how to replay a trace's work instead)."""
    from workloads.profile import load_profile, profile_names

    for name in profile_names():
        p = load_profile(name)
        console.print(f"[bold]{name:10}[/bold] {p.summary} (mean response "
                      f"{p.mean_tokens:.0f} tokens)", highlight=False)
    console.print("[bold]trace:PATH[/bold] the groups of a trace, replayed: its prompt and "
                  "response lengths and rewards (docs/trace.md)", highlight=False)


def build_config(config: Path | None, sets: list[str], start: RunConfig | None = None,
                 **options: object) -> RunConfig:
    """Defaults (`start`'s, or RunConfig's), then the TOML file, then named options,
    then --set overrides; then the whole config is checked (`harness.checks`)."""
    cfg = start if start is not None else RunConfig()
    if config is not None:
        apply(cfg, load_toml(config))
    steps = options.pop("steps_per_rollout", None)
    ray_address = options.pop("ray_address", None)
    apply(cfg, {k: v for k, v in options.items() if v is not None})
    if ray_address is not None:
        cfg.live.ray_address = str(ray_address)
    for assignment in sets:
        set_path(cfg, assignment)
    if steps is not None:  # R = G x U; an R given beside it must agree
        from harness.knob_check import steps_to_groups

        steps_to_groups(cfg, steps, options.get("groups"), sets)
    from harness.checks import check_run

    return check_run(cfg)


def _interrupt(signum: int, frame: object) -> None:
    """`kill` is Ctrl-C: whatever handles SIGINT now handles it (during a simulated
    run, asyncio's Runner, which cancels the run's task instead of raising mid-step)."""
    handler = signal.getsignal(signal.SIGINT)
    if not callable(handler):
        raise KeyboardInterrupt
    handler(signal.SIGINT, frame)  # type: ignore[arg-type]


def _never_started(out: Path, made: bool) -> bool:
    """No trace was written: an empty trace goes, and so does OUT if this run made it."""
    from harness.checks import remove_if_empty

    trace = out / "trace.jsonl"
    if trace.exists() and trace.stat().st_size > 0:
        return False
    trace.unlink(missing_ok=True)
    if made:
        remove_if_empty(out)
    return True


@app.command("run")
def run_cmd(
    out: Annotated[Path, typer.Option(help="Directory for trace.jsonl and metrics.json; "
                                      "one that holds a run already needs --force.")],
    system: Annotated[str | None, typer.Option(
        help="System backend (see `systems`)." + shown(D.system))] = None,
    workload: Annotated[str | None, typer.Option(
        help="Workload (see `workloads`)." + shown(D.workload))] = None,
    groups: Annotated[int | None, typer.Option(
        "--groups", "-R", help="Groups per rollout R." + shown(D.groups))]
    = None,
    group_size: Annotated[int | None, typer.Option(
        "--group-size", "-K", help="Samples per prompt K." + shown(D.group_size))]
    = None,
    update_groups: Annotated[int | None, typer.Option(
        "--update-groups", "-U", help="Groups per update U." + shown(D.update_groups))]
    = None,
    frontier: Annotated[int | None, typer.Option(
        help="cgp-fgd: frontier width F_w." + shown(D.frontier))] = None,
    concurrency: Annotated[int | None, typer.Option(
        help="PipelineRL: sequences in flight per engine replica H."
             + shown(D.concurrency))] = None,
    max_lag: Annotated[int | None, typer.Option(
        help="PipelineRL: admission limit in optimizer steps [default: -1, none].")] = None,
    over_sampling_groups: Annotated[int | None, typer.Option(
        help="APRIL, cgp-april: groups in flight per round, slime's "
             "--over-sampling-batch-size (default 2R, the paper's; 0 or R: none).")] = None,
    steps_per_rollout: Annotated[int | None, typer.Option(
        help="Conventional RL with G steps per rollout: sets R = G x U (an -R that "
             "disagrees is refused).")] = None,
    rounds: Annotated[int | None, typer.Option(help="Rollout rounds." + shown(D.rounds))]
    = None,
    seed: Annotated[int | None, typer.Option(help="Random seed." + shown(D.seed))] = None,
    runtime: Annotated[str | None, typer.Option(
        help="sim (the simulator) or live (a real engine and trainer)."
             + shown(D.runtime))] = None,
    ray_address: Annotated[str | None, typer.Option(
        help="Live: 'local' starts Ray here, HOST:PORT joins a cluster, 'off' runs in one "
             "process." + shown(D.live.ray_address) + f" {RAY_HELP}")] = None,
    config: Annotated[Path | None, typer.Option(help="TOML file with any config fields.")]
    = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="Override: section.field=value (every field: rolloutbench config show)"
                                                   )] = None,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    csv_out: Annotated[bool, typer.Option("--csv", help=CSV_HELP)] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Overwrite the run already in OUT.")] = False,
) -> None:
    """Run one system on one workload; writes OUT/trace.jsonl and OUT/metrics.json.
    An option the system does not read is refused. Ctrl-C stops it cleanly: the
    trace ends with a run_end that says so."""
    from harness.checks import out_dir
    from harness.knob_check import check_knobs, cluster_notes
    from harness.out_guard import refuse_existing_run
    from harness.results import dump_json, execute, provenance, write_atomic

    fmt = output_format(json_out, csv_out)
    try:
        cfg = build_config(config, set_ or [], system=system, workload=workload, groups=groups,
                           group_size=group_size, update_groups=update_groups,
                           frontier=frontier, rounds=rounds, seed=seed,
                           concurrency=concurrency, max_lag=max_lag,
                           over_sampling_groups=over_sampling_groups,
                           steps_per_rollout=steps_per_rollout, runtime=runtime,
                           ray_address=ray_address)
        check_knobs(cfg.system, cfg)
        refuse_existing_run(out, force)
    except (ConfigError, UnknownName) as err:
        fail(str(err))
    for note in cluster_notes(cfg):
        typer.echo(f"note: {note}", err=True)
    made = out_dir(out)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops a run as cleanly as Ctrl-C
    try:
        rows = execute(cfg, out / "trace.jsonl")
    except KeyboardInterrupt:
        said = ("nothing was written" if _never_started(out, made)
                else f"the trace {out / 'trace.jsonl'} is closed")
        typer.echo(f"error: interrupted; {said}", err=True)
        raise typer.Exit(130) from None
    except Exception as err:  # the run failed; its trace names the error too
        if _never_started(out, made):  # it failed to start: say why, leave nothing
            if isinstance(err, ConfigError):
                fail(str(err))
            typer.echo(f"error: run failed to start: {type(err).__name__}: {err}", err=True)
            raise typer.Exit(1) from None
        typer.echo(f"error: run failed: {type(err).__name__}: {err} "
                   f"(trace: {out / 'trace.jsonl'})", err=True)
        raise typer.Exit(1) from None
    write_atomic(out / "metrics.json", dump_json(rows))
    write_atomic(out / "run.json", dump_json(provenance(config=cfg.to_dict())))
    print_metrics(rows, fmt)


@app.command("metrics")
def metrics_cmd(
    traces: Annotated[list[Path], typer.Argument(help="Trace files (JSON lines).")],
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    csv_out: Annotated[bool, typer.Option("--csv", help=CSV_HELP)] = False,
    steps: Annotated[bool, typer.Option("--steps", help="One row per optimizer step (lag, "
                                        "ESS) instead of per round.")] = False,
    partial: Annotated[bool, typer.Option("--partial", help="Also read a trace whose last "
                                          "line was cut mid-write (it is left out).")] = False,
) -> None:
    """Per-round metrics of one or more traces (or per optimizer step with --steps).
    A trace that stops short (an interrupted run) is read as far as it goes: rounds
    that did not finish are flagged `incomplete`, with a warning on stderr."""
    from harness.metrics import metrics_for_traces, steps_for_traces
    from harness.trace import TraceError

    fmt = output_format(json_out, csv_out)

    def warn(message: str) -> None:
        typer.echo(f"warning: {message}", err=True)

    try:
        read = steps_for_traces if steps else metrics_for_traces
        rows = read([str(p) for p in traces], partial=partial, warn=warn)
    except TraceError as err:
        fail(str(err))
    (print_rows if steps else print_metrics)(rows, fmt)


@app.command("calibrate")
def calibrate_cmd(
    paper: Annotated[str, typer.Argument(
        help="Which calibration to fit: rolloutpipe, april, rollpacker, all; or engine "
             "(measure this machine's live engine and trainer).")],
    dry_run: Annotated[bool, typer.Option(help="Print the fit; do not write it.")] = False,
    model_dir: Annotated[Path, typer.Option(help="engine: the live model to measure.")]
    = Path("runs/live-model"),
    out: Annotated[Path | None, typer.Option(
        help="engine: the calibration file to write (the Ray one goes beside it, "
             "NAME-ray.toml)." + shown("runs/calibration/HOST/cpu-live.toml"))]
    = None,
    max_model_len: Annotated[int, typer.Option(
        help="engine: context length of the measured engine (as the runs will use).")]
    = 2048,
    kv_cache_mb: Annotated[int, typer.Option(help="engine: its KV cache in MiB.")] = 256,
) -> None:
    """Fit the simulator's free parameters to the baseline's observations only; or,
    with `engine`, measure this machine's live engine and trainer into a calibration
    file that `--set sim.calibration=FILE` and `validate --calibration FILE` use."""
    from harness import calibrate

    if paper == "engine":
        import socket

        from harness.live.runtime import missing_live

        if missing_live():
            fail(f"calibrate engine needs {', '.join(missing_live())}: run make setup-live")
        from harness.checks import check_model_dir

        check_model_dir(model_dir, "--model-dir")
        from harness.live.measure import calibrate_engine
        from harness.live.runtime import available

        target = out or Path("runs/calibration") / socket.gethostname() / "cpu-live.toml"
        if target.exists() and target.is_dir():
            fail(f"--out: {target} is a folder; give a file name ending in .toml")
        ray_out = target.with_name(f"{target.stem}-ray.toml") if available()["ray"] else None
        from harness.live.logs import engine_log

        with engine_log(target.parent / "engine.log"):  # vLLM's lines, not stdout
            result = calibrate_engine(str(model_dir), target, ray_out, max_model_len,
                                      kv_cache_mb)
        console.print_json(json.dumps(result))
        return
    names = list(calibrate.FITS) if paper == "all" else [paper]
    for name in names:
        if name not in calibrate.FITS:
            fail(str(UnknownName(f"unknown calibration {name!r}; known: all, "
                                 f"{', '.join(calibrate.FITS)}")))
    for name in names:
        result = calibrate.FITS[name](write=not dry_run, progress=True)
        console.print_json(json.dumps({"calibration": name, **result}))


REPRODUCE_CHOICES = ("rolloutpipe", "pipelinerl", "april", "rollpacker", "all", "would-need")


@app.command("reproduce")
def reproduce_cmd(
    paper: Annotated[str, typer.Argument(
        help="A paper (rolloutpipe, pipelinerl, april, rollpacker), all four (all), or "
             "would-need (the search for what each missed prediction needs).")],
    out: Annotated[Path, typer.Option(help="Directory for CSV results and claims.")] = Path(
        "results"),
    figures: Annotated[Path | None, typer.Option(
        help="Directory for figures." + shown("OUT"))] = None,
    rounds: Annotated[int, typer.Option(help="Rounds per point.")] = 4,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    jobs: Annotated[int, typer.Option(help="Worker processes, 0: one per core (the results "
                                      "are the same for any number).")] = 0,
    only: Annotated[str, typer.Option(help="would-need: search only the rows of these papers "
                                      "or claims (comma-separated: a paper, or part of a "
                                      "claim); the others are kept.")] = "",
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    csv_out: Annotated[bool, typer.Option("--csv", help=CSV_HELP)] = False,
) -> None:
    """Reproduce a paper's experiments on the simulator, with figures and claims.

    `reproduce would-need` is separate (minutes): for every missed prediction of
    OUT/claims.csv it searches the parameter value that would reproduce the paper
    and writes OUT/would_need.csv, which later claims tables carry."""
    from harness import reproduce

    fmt = output_format(json_out, csv_out)
    if paper == "would-need":
        would_need_cmd(out, [p for p in only.split(",") if p] or None, fmt)
        return
    names = list(reproduce.PAPERS) if paper == "all" else [paper]
    for name in names:
        if name not in reproduce.PAPERS:
            fail(str(UnknownName(f"unknown reproduction {name!r}; known: "
                                 f"{', '.join(REPRODUCE_CHOICES)}")))
    from harness.checks import check_out

    for folder, option in ((out, "--out"), (figures, "--figures")):
        if folder is not None:
            check_out(folder, option)  # a file, or unmakeable: one line before any work
    from harness.reproduce.pool import default_jobs

    if jobs < 0:
        fail(f"--jobs: must be 0 (one per core) or more, got {jobs}")
    claims = reproduce.run(names, out, figures or out, rounds=rounds, seed=seed,
                           jobs=jobs or default_jobs())
    if fmt != "table":
        from harness.cli_tables import machine

        machine(claims, fmt)
        return
    hits = sum(1 for c in claims if c["within"])
    console.print(f"claims within tolerance: {hits}/{len(claims)} (see {out / 'claims.csv'})",
                  highlight=False)


def would_need_cmd(out: Path, only: list[str] | None, fmt: str = "table") -> None:
    """Run the would-need searches and print what each missed prediction needs."""
    import time

    from harness.cli_tables import Column, build, emit, machine
    from harness.reproduce import would_need

    if not (out / "claims.csv").exists():
        fail(f"--out: no claims.csv in {out} (run `rolloutbench reproduce all` first)")
    start = time.perf_counter()
    rows = would_need.run(out, only=only)
    if fmt != "table":
        machine(rows, fmt)
        return
    shown = [{**r, "current": f"{r['current']}{' ' + r['unit'] if r['unit'] else ''}"}
             for r in rows]
    columns = [Column(k, k.replace("_", " "), "text") for k in
               ("paper", "claim", "config", "current", "would_need", "physical_bound",
                "plausible")]
    emit(console, shown, fmt, lambda rs: build(rs, columns, lift=()))
    console.print(f"would-need: {len(rows)} missed predictions in "
                  f"{time.perf_counter() - start:.0f} s wall (see {out / 'would_need.csv'})",
                  highlight=False)


def main() -> None:  # pragma: no cover
    app()


# The other command modules register themselves on `app` when imported.
from harness import (  # noqa: E402, F401
    cli_analysis,
    cli_config,
    cli_live,
    cli_regress,
    cli_sweep,
    cli_whatif,
)
from harness.plan import cli as _plan_cli  # noqa: E402, F401
