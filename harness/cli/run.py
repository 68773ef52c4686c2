"""The basic commands: list systems and workloads, run one configuration, read
metrics from traces."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Annotated, Any

import typer

from harness.cli.common import (
    CSV_HELP,
    JSON_HELP,
    D,
    build_config,
    console,
    fail,
    kill_as_ctrl_c,
    output_format,
    print_metrics,
    print_rows,
    refuse_overwrite,
    shown,
    stop_code,
    trace_of,
    warning,
    workload_file,
)
from harness.core.config import ConfigError
from harness.core.progress import LateBar
from harness.core.registry import UnknownName
from harness.shared.ray_connect import HELP as RAY_HELP

commands = typer.Typer()  # added to the app in harness/cli/app.py


@commands.command("systems")
def systems_cmd() -> None:
    """List the system backends, and the rule the asynchronous ones' knobs default by."""
    from harness.cli.tables import show_named
    from harness.core.async_knobs import DEFAULTS_RULE
    from systems import SYSTEMS

    show_named(console, [(name, cls.summary + (
        f"\nonly {' or '.join(cls.placements)}: {cls.placement_why}"
        if getattr(cls, "placements", None) else "")) for name, cls in SYSTEMS.items()])
    console.print(f"\n{DEFAULTS_RULE}", highlight=False)


@commands.command("workloads")
def workloads_cmd() -> None:
    """List the workload profiles, and the other forms --workload takes: a trace's work
    replayed, and a profile file of one's own."""
    from harness.cli.tables import show_named
    from workloads.own_jsonl import PREFIX as OWN_PREFIX
    from workloads.profile import FILE_PREFIX, load_profile, profile_names
    from workloads.trace_source import CYCLE_PREFIX, PREFIX

    rows = [(name, f"{p.summary} (mean response {p.mean_tokens:.0f} tokens)")
            for name in profile_names() for p in [load_profile(name)]]
    rows += [
        (f"{PREFIX}PATH", "the groups of a trace, replayed: its prompt and response lengths "
                          "and rewards (docs/trace.md)"),
        (f"{CYCLE_PREFIX}PATH", "the same, the groups replayed again from the first when a "
                                "run draws more than the trace holds (a system that "
                                "over-samples)"),
        (f"{FILE_PREFIX}PATH", "a profile file of your own, the fields of "
                               "workloads/profiles/*.toml (or a PATH ending in .toml)\n"
                               "one is made from your own data by jsonl:PATH (below)"),
        (f"{OWN_PREFIX}PATH", "a dataset of your own: JSON lines of prompt, answer and verifier "
                              "(math, number, letter), measured into PATH.toml beside it and "
                              "run; edit its assumed response lengths, pass rate and verifier "
                              "latency there (docs/workloads.md)"),
    ]
    show_named(console, rows)  # wrapped to 100 columns, the text under the text


TRACE_FORMATS = {"zst": "trace.jsonl.zst", "jsonl": "trace.jsonl"}
TRACE_FORMAT_HELP = (
    "The trace's form: zst (OUT/trace.jsonl.zst: the JSON lines compressed with zstd, "
    "about 14x smaller; every rolloutbench command reads it, and `rolloutbench "
    "trace-convert` or `zstd -d` gives the lines) or jsonl (OUT/trace.jsonl, plain lines "
    "for other tools). \\[default: zst on the simulator; jsonl live, whose trace is "
    "written line by line as it goes]")


def trace_file(out: Path, trace_format: str | None, runtime: str) -> Path:
    """Where the run's trace goes, by --trace-format and the runtime; bad input exits 2.
    A simulated run writes its trace once, at its end, so compressing it costs little;
    a live run writes each line as it happens (it may die at any moment), plain."""
    if trace_format is None:
        trace_format = "zst" if runtime == "sim" else "jsonl"
    if trace_format not in TRACE_FORMATS:
        fail(f"--trace-format: {trace_format!r} is not one of {', '.join(TRACE_FORMATS)}")
    if trace_format == "zst" and runtime != "sim":
        fail("--trace-format zst: a live run writes its trace line by line as it goes "
             "(jsonl); compress it afterwards with `rolloutbench trace-convert`")
    return out / TRACE_FORMATS[trace_format]


def _never_started(trace: Path, made: bool) -> bool:
    """No trace was written: an empty trace goes, and so does OUT if this run made it."""
    from harness.run.out_folder import remove_if_empty

    out = trace.parent
    if trace.exists() and trace.stat().st_size > 0:
        return False
    trace.unlink(missing_ok=True)
    if made:
        remove_if_empty(out)
    return True


@commands.command("run")
def run_cmd(
    out: Annotated[Path, typer.Option(help="Directory for the trace (trace.jsonl.zst or "
                                      "trace.jsonl, --trace-format) and metrics.json; one "
                                      "that holds a run already needs --force.")],
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
        help="PipelineRL: admission limit in optimizer steps" + shown("-1, none"))] = None,
    over_sampling_groups: Annotated[int | None, typer.Option(
        help="APRIL, cgp-april: groups in flight per round, slime's "
             "--over-sampling-batch-size (0 or R: none)." + shown("2R, the paper's"))] = None,
    steps_per_rollout: Annotated[int | None, typer.Option(
        help="Conventional RL with G steps per rollout: sets R = G x U (an -R that "
             "disagrees is refused)." + shown("none: R as -R gives it"))] = None,
    rounds: Annotated[int | None, typer.Option(help="Rollout rounds." + shown(D.rounds))]
    = None,
    seed: Annotated[int | None, typer.Option(help="Random seed." + shown(D.seed))] = None,
    model: Annotated[str | None, typer.Option(
        help="Simulator: the model, a preset (`rolloutbench presets` lists them) or a "
             "Hugging Face config.json path; sim.model." + shown(D.sim.model))] = None,
    gpu: Annotated[str | None, typer.Option(
        help="Simulator: the engines' GPU preset (`rolloutbench presets` lists them), "
             "sim.rollout_gpu; the trainer's: --set sim.trainer_gpu=NAME."
             + shown(D.sim.rollout_gpu))] = None,
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
    trace_format: Annotated[str | None, typer.Option(
        "--trace-format", help=TRACE_FORMAT_HELP, show_default=False)] = None,
) -> None:
    """Run one system on one workload; writes OUT/trace.jsonl.zst (a simulated run;
    --trace-format jsonl, or a live run: OUT/trace.jsonl) and OUT/metrics.json.
    An option the system does not read is refused. Ctrl-C stops it cleanly: the
    trace ends with a run_end that says so."""
    from harness.core.files import dump_json, provenance, write_atomic
    from harness.core.metrics import ROUND_METRIC_EVENTS
    from harness.core.trace_io import TRACE_NAMES, compressed_name
    from harness.core.yardstick import EVENTS
    from harness.run.execute import execute, reads
    from harness.run.footprint import check_footprint
    from harness.run.knob_check import cluster_notes
    from harness.run.out_folder import out_dir, refuse_existing_run

    run_files = (*TRACE_NAMES, "metrics.json", "run.json")  # what a run leaves in OUT
    fmt = output_format(json_out, csv_out)
    refuse_overwrite("--out", out, [("--config", config), ("--workload", workload_file(workload))],
                     run_files)
    try:
        cfg = build_config(config, set_ or [], trace_shape=True, system=system,
                           workload=workload, groups=groups,
                           group_size=group_size, update_groups=update_groups,
                           frontier=frontier, rounds=rounds, seed=seed,
                           concurrency=concurrency, max_lag=max_lag,
                           over_sampling_groups=over_sampling_groups,
                           steps_per_rollout=steps_per_rollout, runtime=runtime,
                           ray_address=ray_address, model=model, gpu=gpu)
        refuse_existing_run(out, force)
    except (ConfigError, UnknownName) as err:
        fail(str(err))
    trace = trace_file(out, trace_format, cfg.runtime)
    try:  # memory and trace size, before anything is written
        check_footprint(cfg, out, compressed=compressed_name(trace))
    except ConfigError as err:
        fail(str(err))
    for note in cluster_notes(cfg):  # within 100 columns (rollpacker's ran to 227)
        typer.echo(textwrap.fill(f"note: {note}", 100, subsequent_indent="  ",
                                 break_on_hyphens=False), err=True)
    made = out_dir(out)
    # a forced run lets go of the run it replaces now: stopped or failed, it leaves its
    # own trace alone, never beside the other run's metrics (or its trace of the other form)
    for name in run_files:
        (out / name).unlink(missing_ok=True)
    kill_as_ctrl_c()
    try:  # a simulated run that takes a while shows how many rounds are done
        with LateBar(f"simulating {cfg.system}, rounds", cfg.rounds) as bar:
            rows, line = execute(cfg, trace, reads(*ROUND_METRIC_EVENTS, *EVENTS)(_rows_and_line),
                                 progress=bar.update)
    except KeyboardInterrupt:
        said = ("nothing was written" if _never_started(trace, made)
                else f"the trace {trace} is closed")
        code, word = stop_code()
        typer.echo(f"error: {word}; {said}", err=True)
        raise typer.Exit(code) from None
    except Exception as err:  # the run failed; its trace names the error too
        if _never_started(trace, made) and isinstance(err, ConfigError):
            fail(str(err))  # bad input found as it started: one line, nothing left
        _say_failed(err, trace, started=not _never_started(trace, made))
        raise typer.Exit(1) from None
    rows = with_step_source(rows, trace)
    write_atomic(out / "metrics.json", dump_json(rows))
    write_atomic(out / "run.json", dump_json(provenance(config=cfg.to_dict())))
    print_metrics(rows, fmt)
    if fmt == "table":  # what the run delivered, the figure systems are ranked by
        _print_delivered(trace, line)


def _say_failed(err: Exception, trace: Path, started: bool) -> None:
    """A run that failed, in one line naming where it was raised (a system of one's own
    that raises is found there); ROLLOUTBENCH_TRACEBACK=1 prints the whole traceback
    first. One that failed to start left nothing; one that started, its closed trace."""
    import os
    import traceback

    from harness.core.notes import raised_at

    if os.environ.get("ROLLOUTBENCH_TRACEBACK"):
        traceback.print_exception(err)
    where = raised_at(err)
    said = f"{type(err).__name__}: {err}" + (f", raised at {where}" if where else "")
    typer.echo(f"error: run failed: {said} (trace: {trace})" if started
               else f"error: run failed to start: {said}", err=True)


def _rows_and_line(events: list[dict]) -> tuple[list[dict], str]:
    """A run's metric rows and its delivered line, from the events the run kept (on
    the simulator, only the kinds these read are decoded; the trace is not read back:
    at 262k requests that took 288 MB more than the run itself)."""
    from harness.core.metrics import round_metrics
    from harness.core.yardstick import delivered, with_delivered

    fig = delivered(events)
    return with_delivered(round_metrics(events), fig), delivered_line(fig)


def _print_delivered(path: Path, line: str) -> None:
    console.print(textwrap.fill(f"{path}: {line}", 100, subsequent_indent="  ",
                                break_on_hyphens=False), highlight=False, soft_wrap=True)


def _seed(path: Path) -> object:
    """The run's seed, from its header (already read and checked)."""
    import msgspec

    from harness.core.trace_io import first_line

    return msgspec.json.decode(first_line(path)).get("seed")


def no_steps(path: Path) -> str:
    """Why `metrics --steps` has no row for a trace: an import whose source records no
    optimizer step, or a run that stopped before its first."""
    import msgspec

    from harness.core.trace_io import first_line

    head = msgspec.json.decode(first_line(path))
    meta = head.get("import") if isinstance(head, dict) else None
    why = (f"{meta.get('format', 'the source')}'s logs record none"
           if isinstance(meta, dict) else "the run stopped before its first")
    return f"{path}: no optimizer steps ({why}); drop --steps for its rounds"


def delivered_line(fig: dict[str, Any]) -> str:
    """What a run delivered over its steady window (harness.core.yardstick's figures), in
    one line: the figures systems are ranked by, the same for every kind of system."""
    from harness.core.yardstick import describe

    if fig["no_window"]:
        return f"delivered: {fig['no_window']}"
    lag = fig["window_lag_mean"]
    if not (math.isnan(fig["trained_tokens_per_s"]) and math.isnan(fig["generated_tokens_per_s"])):
        tokens = (f"{fig['trained_tokens_per_s']:,.0f} trained tok/s, "
                  f"{fig['trained_samples_per_s']:.3g} samples/s, {fig['step_s']:.3g} s/step;"
                  f" generated {fig['generated_tokens_per_s']:,.0f} tok/s")
    else:  # an import of times alone (roll, tinker): no token counts, not zero tokens
        tokens = (f"{fig['trained_samples_per_s']:.3g} samples/s, {fig['step_s']:.3g} "
                  f"s/step; token counts not recorded")
    policy = ("policy versions not recorded" if lag != lag else
              f"token-weighted mean lag {lag:.2f} steps (max {fig['window_lag_max']:.0f}), ESS "
              f"{fig['window_ess']:.3f}")
    return f"delivered over {describe(fig)}: {tokens}; {policy} (docs/plan.md#the-yardstick)"


def with_step_source(rows: list[dict], trace: Path) -> list[dict]:
    """Each metric row with where the engine's step times came from (a simulated run's
    header says; a live run has a real engine and no such line)."""
    import json

    from harness.core.trace_io import first_line

    source = json.loads(first_line(trace)).get("step_source")
    return rows if source is None else [{**row, "step_source": source} for row in rows]


@commands.command("metrics")
def metrics_cmd(
    traces: Annotated[list[Path], typer.Argument(
        help="Trace files (JSON lines, plain or .zst), or run folders (their trace).")],
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    csv_out: Annotated[bool, typer.Option("--csv", help=CSV_HELP)] = False,
    steps: Annotated[bool, typer.Option("--steps", help="One row per optimizer step (lag, "
                                        "ESS) instead of per round.")] = False,
    partial: Annotated[bool, typer.Option("--partial", help="Kept for scripts: a trace "
                                          "whose last line was cut mid-write is read without "
                                          "it (that line left out, a warning says so), as "
                                          "every command reads one.")] = False,
) -> None:
    """Per-round metrics of one or more traces (or per optimizer step with --steps).
    A trace that stops short (an interrupted run, a last line cut mid-write) is read as
    far as it goes: rounds that did not finish are flagged `incomplete`, with a warning
    on stderr."""
    from harness.core.metrics import metrics_for_traces, steps_for_traces
    from harness.core.trace import TraceError

    fmt = output_format(json_out, csv_out)
    traces = [trace_of(p) for p in traces]  # a run folder: its trace

    figs: dict[str, dict[str, Any]] = {}  # each trace's delivered figures, one reading

    def seen(path: str, trace: Any) -> None:
        from harness.core.yardstick import delivered

        figs[path] = delivered(trace.events)

    from harness.core.progress import late_stage

    try:
        # a last line cut mid-write is left out, said in the warning (--partial or not)
        with late_stage(f"reading {traces[0]}" if len(traces) == 1
                        else f"reading {len(traces)} traces"):
            per_trace = [steps_for_traces([str(p)], partial=True, warn=warning) if steps else
                         metrics_for_traces([str(p)], partial=True, warn=warning, seen=seen)
                         for p in traces]
    except TraceError as err:
        fail(str(err))
    if steps:  # a trace without steps printed nothing and exited 0
        gaps = [no_steps(p) for p, rows in zip(traces, per_trace, strict=True) if not rows]
        if gaps and len(gaps) == len(traces):
            fail(gaps[0])
        for gap in gaps:
            warning(gap)
    if fmt != "table" and not steps:  # every field: the run's delivered figures too
        from harness.core.yardstick import with_delivered

        per_trace = [with_delivered(trace_rows, figs[str(path)])
                     for path, trace_rows in zip(traces, per_trace, strict=True)]
    if fmt != "table" and len(traces) > 1:  # every field: which trace and seed, each row
        for path, trace_rows in zip(traces, per_trace, strict=True):
            seed = _seed(path)
            for row in trace_rows:
                row.update(trace=str(path), seed=seed)
    show = print_rows if steps else print_metrics
    if fmt == "table" and len(traces) > 1:
        # a table a trace, under its name: two runs of one system printed rows alike
        for path, trace_rows in zip(traces, per_trace, strict=True):
            console.print(f"{path}", style="bold", highlight=False)
            if trace_rows:
                show(trace_rows, fmt)
            if not steps:
                _print_delivered(path, delivered_line(figs[str(path)]))
        return
    show([row for trace_rows in per_trace for row in trace_rows], fmt)
    if fmt == "table" and not steps:
        for path in traces:
            _print_delivered(path, delivered_line(figs[str(path)]))
