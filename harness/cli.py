"""The `rolloutbench` command line."""

from __future__ import annotations

import json
import signal
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
    then --set overrides."""
    cfg = start if start is not None else RunConfig()
    if config is not None:
        apply(cfg, load_toml(config))
    steps = options.pop("steps_per_rollout", None)
    ray_address = options.pop("ray_address", None)
    apply(cfg, {k: v for k, v in options.items() if v is not None})
    if ray_address is not None:
        cfg.live.ray_address = str(ray_address)
    if steps is not None:
        if not isinstance(steps, int) or steps < 1:
            raise ConfigError("--steps-per-rollout: must be a positive integer")
        cfg.groups = steps * cfg.update_groups
    for assignment in sets:
        set_path(cfg, assignment)
    cfg.validate()
    if cfg.runtime == "sim" or cfg.live.lengths == "replay":
        _limits(cfg)  # an unknown workload, or a trace that cannot drive a run
    from harness.results import resolve_defaults
    from systems import get_system

    get_system(cfg.system)
    if cfg.runtime == "live":
        from harness.live.runtime import missing_live

        missing = missing_live()
        if missing:
            raise ConfigError(f"--set runtime=live: needs {', '.join(missing)} "
                              "(install the live extras: pip install -e '.[live]')")
        if cfg.live.lengths == "replay":
            _check_replay(cfg)
        else:
            _check_live_workload(cfg)
        from harness.live.backends import check

        check(cfg)
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
        try:
            resolve(cfg.sim)
        except (OSError, ValueError) as err:
            raise ConfigError(f"--set sim.calibration: {err}") from None
        longest = cfg.max_response_tokens + _limits(cfg)[1]
        if kv_capacity_tokens(cfg) < longest:
            raise ConfigError(f"--set sim.mem_fraction: the KV cache cannot hold one sequence "
                              f"of {longest} tokens")
    return cfg


def _limits(cfg: RunConfig) -> tuple[int, int]:
    """(response cap, longest prompt) of the run's workload; a trace that cannot
    drive a run is a config error naming it."""
    from harness.trace import TraceError
    from workloads.profile import workload_limits

    try:
        return workload_limits(cfg.workload, cfg.group_size)
    except (TraceError, ValueError) as err:
        raise ConfigError(f"--workload {cfg.workload}: {err}") from None


def _check_replay(cfg: RunConfig) -> None:
    """A live replay draws the simulator's workload: each prompt and response must
    fit the engine's context."""
    from harness.results import resolve_defaults

    resolve_defaults(cfg)
    cap, prompt_max = _limits(cfg)
    if prompt_max + cfg.max_response_tokens > cfg.live.max_model_len:
        raise ConfigError(
            f"--set live.max_model_len: {cfg.live.max_model_len} tokens cannot hold the "
            f"workload's longest prompt ({prompt_max}) plus a response of "
            f"{cfg.max_response_tokens} (raise it, or lower max_response_tokens)")


def _check_live_workload(cfg: RunConfig) -> None:
    from harness.live.workload import PROCEDURAL, REASONING_GYM
    from harness.registry import unknown_name
    from workloads.datasets import WORKLOADS

    known = [*PROCEDURAL, *REASONING_GYM, *WORKLOADS]
    if cfg.workload not in known:
        raise unknown_name("live workload", cfg.workload, known)
    if cfg.workload in WORKLOADS and not cfg.live.data_dir:
        raise ConfigError(f"--set live.data_dir: workload {cfg.workload!r} reads real data")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


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
    runtime: Annotated[str | None, typer.Option(
        help="sim (the simulator) or live (a real engine and trainer) [default: sim].")] = None,
    ray_address: Annotated[str | None, typer.Option(
        help="Live: 'local' starts Ray here, HOST:PORT joins a cluster, 'off' runs in one "
             "process [default: local].")] = None,
    config: Annotated[Path | None, typer.Option(help="TOML file with any config fields.")]
    = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="Override: section.field=value (every field: rolloutbench config show)"
                                                   )] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print metrics as JSON.")] = False,
) -> None:
    """Run one system on one workload; writes OUT/trace.jsonl and OUT/metrics.json.
    Ctrl-C stops it cleanly: the trace ends with a run_end that says so."""
    from harness.results import dump_json, execute, provenance, write_atomic

    try:
        cfg = build_config(config, set_ or [], system=system, workload=workload, groups=groups,
                           group_size=group_size, update_groups=update_groups,
                           frontier=frontier, rounds=rounds, seed=seed,
                           concurrency=concurrency, max_lag=max_lag,
                           over_sampling_groups=over_sampling_groups,
                           steps_per_rollout=steps_per_rollout, runtime=runtime,
                           ray_address=ray_address)
    except (ConfigError, UnknownName) as err:
        fail(str(err))
    out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops a run as cleanly as Ctrl-C
    try:
        rows = execute(cfg, out / "trace.jsonl")
    except KeyboardInterrupt:
        typer.echo(f"error: interrupted; the trace {out / 'trace.jsonl'} is closed", err=True)
        raise typer.Exit(130) from None
    except Exception as err:  # the run failed; its trace names the error too
        typer.echo(f"error: run failed: {type(err).__name__}: {err} "
                   f"(trace: {out / 'trace.jsonl'})", err=True)
        raise typer.Exit(1) from None
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
    partial: Annotated[bool, typer.Option("--partial", help="Also read a trace whose last "
                                          "line was cut mid-write (it is left out).")] = False,
) -> None:
    """Per-round metrics of one or more traces (or per optimizer step with --steps).
    A trace that stops short (an interrupted run) is read as far as it goes: rounds
    that did not finish are flagged `incomplete`, with a warning on stderr."""
    from harness.metrics import metrics_for_traces, steps_for_traces
    from harness.results import dump_json
    from harness.trace import TraceError

    def warn(message: str) -> None:
        typer.echo(f"warning: {message}", err=True)

    try:
        read = steps_for_traces if steps else metrics_for_traces
        rows = read([str(p) for p in traces], partial=partial, warn=warn)
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
    out: Annotated[Path | None, typer.Option(
        help="engine: the calibration file to write (the Ray one goes beside it, "
             "NAME-ray.toml) [default: runs/calibration/HOST/cpu-live.toml].")] = None,
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
        if not (model_dir / "config.json").exists():
            fail(f"--model-dir: no model in {model_dir} (make one: rolloutbench model init "
                 f"{model_dir})")
        from harness.live.measure import calibrate_engine
        from harness.live.runtime import available

        target = out or Path("runs/calibration") / socket.gethostname() / "cpu-live.toml"
        if target.exists() and target.is_dir():
            fail(f"--out: {target} is a folder; give a file name ending in .toml")
        ray_out = target.with_name(f"{target.stem}-ray.toml") if available()["ray"] else None
        console.print_json(json.dumps(calibrate_engine(str(model_dir), target, ray_out,
                                                       max_model_len, kv_cache_mb)))
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
    only: Annotated[str, typer.Option(help="would-need: search only the rows of these papers "
                                      "or claims (comma-separated: a paper, or part of a "
                                      "claim); the others are kept.")] = "",
) -> None:
    """Reproduce a paper's experiments on the simulator, with figures and claims.

    `reproduce would-need` is separate (minutes): for every missed prediction of
    OUT/claims.csv it searches the parameter value that would reproduce the paper
    and writes OUT/would_need.csv, which later claims tables carry."""
    from harness import reproduce

    if paper == "would-need":
        would_need_cmd(out, [p for p in only.split(",") if p] or None)
        return
    names = list(reproduce.PAPERS) if paper == "all" else [paper]
    for name in names:
        if name not in reproduce.PAPERS:
            fail(str(UnknownName(f"unknown reproduction {name!r}; known: all, "
                                 f"{', '.join(reproduce.PAPERS)}")))
    from harness.claims import ClaimsFileError

    try:
        claims = reproduce.run(names, out, figures or out, rounds=rounds, seed=seed)
    except ClaimsFileError as err:  # found before any simulation runs
        fail(str(err))
    hits = sum(1 for c in claims if c["within"])
    console.print(f"claims within tolerance: {hits}/{len(claims)} (see {out / 'claims.csv'})")


def would_need_cmd(out: Path, only: list[str] | None) -> None:
    """Run the would-need searches and print what each missed prediction needs."""
    import time

    from harness.reproduce import would_need

    if not (out / "claims.csv").exists():
        fail(f"--out: no claims.csv in {out} (run `rolloutbench reproduce all` first)")
    start = time.perf_counter()
    rows = would_need.run(out, only=only)
    table = Table(show_header=True, header_style="bold")
    for col in ("paper", "claim", "config", "current", "would_need", "physical_bound",
                "plausible"):
        table.add_column(col)
    for r in rows:
        unit = f" {r['unit']}" if r["unit"] else ""
        table.add_row(r["paper"], r["claim"], r["config"], f"{r['current']}{unit}",
                      f"{r['would_need']}", r["physical_bound"], r["plausible"])
    console.print(table)
    console.print(f"would-need: {len(rows)} missed predictions in "
                  f"{time.perf_counter() - start:.0f} s wall (see {out / 'would_need.csv'})")


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
