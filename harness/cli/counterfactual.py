"""`rolloutbench counterfactual`: every system on exactly one run's work."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from harness.cli.common import (
    CSV_HELP,
    JSON_HELP,
    build_config,
    console,
    fail,
    output_format,
    refuse_overwrite,
    trace_of,
    wrap,
)

if TYPE_CHECKING:
    from harness.core.config import RunConfig
    from harness.studies.twin import Fitted

commands = typer.Typer()  # added to the app in harness/cli/app.py

WRITES = ("counterfactual.csv", "counterfactual.png", "twin-engine.toml", "runs/")  # in OUT


@commands.command("counterfactual")
def counterfactual_cmd(
    trace: Annotated[Path, typer.Argument(help="A trace: `rolloutbench import`'s, or any "
                                          "run's (its file or its run folder).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for counterfactual.csv, "
                                      "counterfactual.png and the runs' traces.")],
    systems: Annotated[str, typer.Option(
        help="Comma-separated systems (see `systems`).")] = "all",
    update_groups: Annotated[int | None, typer.Option(
        "--update-groups", "-U", help="Groups per optimizer update U \\[default: --config's or "
                                      "--set's, else the run's own where its trace records "
                                      "it, else one update per round].")]
    = None,
    config: Annotated[Path | None, typer.Option(
        help="TOML file with the cluster (sim.* fields), e.g. a `plan` best/*.toml.")] = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="Override: sim.field=value (every field: rolloutbench config show)")]
    = None,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    csv_out: Annotated[bool, typer.Option("--csv", help=CSV_HELP)] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Overwrite the counterfactual already in OUT.")] = False,
    fit: Annotated[bool, typer.Option(
        "--fit/--no-fit", help="A timed trace: fit the engine (and the trainer, where the "
                               "trace times it) to the run's own requests and run every "
                               "system on it; --no-fit runs on the stated cluster.")] = True,
) -> None:
    """Replay one run's work (its lengths, rewards and, where recorded, check latencies)
    under every system on the simulator, for as many rounds as the trace holds. A timed
    trace's own metrics come first, then its twin: the run's schedule (read from the
    trace) on the run's engine (fitted to its requests), with its error beside them; every
    system then runs on that engine. An untimed trace needs the cluster stated (--config,
    --set sim.*). The first line of output says which engine was used."""
    from harness.cli.tables import counterfactual_table, emit, to_csv
    from harness.core.config import ConfigError
    from harness.core.files import write_atomic
    from harness.core.registry import UnknownName
    from harness.core.trace import TraceError
    from harness.run.knob_check import ignored_line
    from harness.studies import counterfactual as cf
    from harness.studies import twin
    from harness.studies.twin.schedule import infer
    from systems import SYSTEMS
    from workloads.trace_source import TraceWorkloadError

    fmt = output_format(json_out, csv_out)
    names = list(SYSTEMS) if systems == "all" else [s.strip() for s in systems.split(",")
                                                        if s.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if not names:
        fail(f"--systems: no system named; `rolloutbench systems` lists the {len(SYSTEMS)} "
             "known")
    if unknown:  # the first, as `run` and `plan` name it ("did you mean 'cgp'?")
        from harness.core.registry import unknown_name

        fail(f"--systems: {unknown_name('system', unknown[0], list(SYSTEMS))}")
    trace = trace_of(trace)  # a run folder: its own trace
    if not trace.is_file():
        fail(f"TRACE: {trace}: no such file")
    if update_groups is not None and update_groups < 1:
        fail(f"--update-groups: must be >= 1, got {update_groups}")
    taken = [a for a in set_ or [] if a.split("=", 1)[0].strip() in cf.FROM_TRACE]
    if taken:
        fail(f"--set {taken[0]}: the trace decides {', '.join(cf.FROM_TRACE)}; set the "
             f"cluster (sim.*), U (-U) or a system's knobs")
    if out.exists() and not out.is_dir():  # before the cluster line: one line, no work
        fail(f"--out: {out} is a file; give a folder")
    refuse_overwrite("--out", out, [("TRACE", trace), ("--config", config)], WRITES)
    if (out / "counterfactual.csv").exists() and not force:
        fail(f"--out: {out} holds a counterfactual already (--force overwrites it)")
    stated = config is not None or any(a.strip().startswith("sim.") for a in set_ or [])
    notes = io.StringIO()  # the workload's notes follow the line that says which engine
    try:
        work = cf.shape(trace)
        from harness.core.trace import read_prefix

        cut = read_prefix(trace, allow_cut=True)  # every reader below leaves the cut line out
        if not cut.complete:  # as metrics says it: its measured figures stop short too
            notes.write(wrap(f"warning: TRACE: {trace}: incomplete trace ({cut.problem()}); "
                             f"its measured figures and the work replayed are as far as it "
                             f"goes") + "\n")
        schedule = infer(trace, work.header, work.groups)

        def build(name: str, knobs: dict | None = None, u: int | None = update_groups
                  ) -> RunConfig:
            return build_config(config, set_ or [],
                                start=cf.start(name, trace, work, u, knobs),
                                ignore=cf.FROM_TRACE)

        from harness.run.checks import PlacementError

        def buildable(name: str) -> RunConfig | None:
            """A system whose source cannot run on the trace's placement is left out,
            said once (the others still run): slime-async colocated, say."""
            try:
                return build(name)
            except PlacementError as err:
                left_out.append(err.reason)
                return None

        left_out: list[str] = []
        with contextlib.redirect_stderr(notes):
            cfgs = [c for c in map(buildable, names) if c is not None]  # every check first
        if not cfgs:
            fail("--systems: none can run on this cluster's sim.placement (why: "
                 "rolloutbench systems)")
        with contextlib.redirect_stderr(notes):
            # the run's own U: a twin at -U's would be another schedule, its errors
            # against the measured run (+97% step s at U 4 for a U 2 run) none of the fit's
            twin_cfg = (build(schedule.system, schedule.knobs, None) if work.timed
                        and schedule.system in SYSTEMS else None)
        fitted = twin.fit_run(trace, cfgs[0].sim.rollout_engines) if fit and work.timed \
            else None
    except (ConfigError, UnknownName, TraceError, TraceWorkloadError) as err:
        hint = (" (not a rolloutbench trace? `rolloutbench import` reads other systems' "
                "logs)") if "missing field 'ev'" in str(err) else ""
        fail(f"{err}{hint}")
    runs = [*cfgs, *([twin_cfg] if twin_cfg is not None else [])]
    existed = out.exists()
    if force:  # the counterfactual it replaces, let go of now: never its runs beside these
        _let_go(out)
    try:
        for line in _price(trace, out, runs, fitted, stated, set_ or [], work.timed):
            typer.echo(wrap(line), err=True)  # within 100 columns (the trainer's ran to 111)
        if twin_cfg is not None:
            typer.echo(f"twin: {schedule.said}", err=True)
        if fitted is not None and fitted.engine is not None:
            for line in _speculated_twice(work.header, runs):
                typer.echo(line, err=True)
        typer.echo(notes.getvalue(), err=True, nl=False)
        if left_out:
            typer.echo(wrap(f"note: left out, as their sources do not run on this cluster: "
                            f"{'; '.join(left_out)}"), err=True)
        given = _given(config, set_ or [], update_groups)
        ignored = ignored_line(cfgs, given, given, {"update_groups": "--update-groups"})
        if ignored:  # the shared options apply where read; said once, not refused
            typer.echo(f"note: {ignored}", err=True)
        rows = cf.run(trace, cfgs, out, twin_cfg)
        write_atomic(out / "counterfactual.csv", to_csv(rows))
        cf.figure(rows, out / "counterfactual.png", f"{trace.name}: every system on its work")
    except KeyboardInterrupt:  # stopped before its table: none of its files left behind
        _let_go(out)
        if not existed and out.is_dir() and not any(out.iterdir()):
            out.rmdir()
        raise
    emit(console, rows, fmt, counterfactual_table)
    if fmt == "table":
        console.print(f"wrote {out / 'counterfactual.csv'} and {out / 'counterfactual.png'}",
                      highlight=False)


def _let_go(out: Path) -> None:
    """What a counterfactual writes in OUT (`WRITES`), removed: a Ctrl-C left the twin's
    engine file and a third of the runs' traces without a table, which a rerun without
    --force then wrote beside."""
    import shutil

    for name in WRITES:
        path = out / name.rstrip("/")
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def _speculated_twice(header: dict, runs: list[RunConfig]) -> list[str]:
    """An engine fitted to a run that speculated holds the speculation's gain; a system
    that drafts itself on it (tlt, or any with --set sim.spec_drafter) counts it twice:
    tlt's twin ran 15.5% over the tlt run it replays. Said once, wrapped at 100."""
    import textwrap

    config = header.get("config")
    sim = config.get("sim") if isinstance(config, dict) else None
    drafter = sim.get("spec_drafter", "off") if isinstance(sim, dict) else "off"
    again = sorted({c.system for c in runs if c.sim.spec_drafter != "off"})
    if drafter == "off" or not again:
        return []
    return textwrap.wrap(f"note: the run speculated ({drafter}): the engine fitted to it holds "
                         f"that gain, and {', '.join(again)} speculate again on top of it "
                         f"(their rows overstate it)", 100, subsequent_indent="  ")


def _given(config: Path | None, sets: list[str], update_groups: int | None) -> set[str]:
    """The fields the user gave every system: -U, --set's, the config file's."""
    from harness.cli.common import _leaves
    from harness.core.config_io import load_toml

    given = {a.split("=", 1)[0].strip() for a in sets}
    given |= {name for name, _ in _leaves(load_toml(config))} if config is not None else set()
    return given | ({"update_groups"} if update_groups is not None else set())


def _price(trace: Path, out: Path, runs: list[RunConfig], fitted: Fitted | None,
           stated: bool, sets: list[str], timed: bool) -> list[str]:
    """Put the run's fitted engine and trainer (where there are) into every config, as
    a calibration file in OUT; the lines that say what prices the runs, which open the
    output. A part the trace cannot fit is the stated cluster's; with no cluster
    stated that is a one-line error, before anything is written."""
    from harness.core.files import write_atomic
    from harness.sim.calibration import resolve
    from harness.studies import counterfactual as cf
    from harness.studies import twin

    if fitted is None or (fitted.engine is None and fitted.trainer is None):
        if not stated:
            why = ("not fitted (--no-fit)" if timed else "untimed") if fitted is None \
                else f"unfittable ({fitted.why})"
            # --help says how: a plan's best/*.toml, or --set sim.FIELD=...
            fail(f"TRACE: {trace}: {why}: give its cluster (--config/--set)")
        return [f"cluster (stated): {cf.describe_cluster(runs[0])}"]
    if fitted.engine is None and not stated:
        fail(f"TRACE: {fitted.why}: give its cluster (--config/--set)")
    out.mkdir(parents=True, exist_ok=True)
    path = out / "twin-engine.toml"
    write_atomic(path, twin.calibration_file(fitted, resolve(runs[0].sim), trace))
    engines_typed = any(a.split("=", 1)[0].strip() == "sim.rollout_engines" for a in sets)
    for cfg in runs:
        cfg.sim.calibration = str(path)
        if fitted.engine is not None and fitted.engine.engines_known and not engines_typed:
            cfg.sim.rollout_engines = fitted.engine.engines  # the fit is per replica
    lines = (fitted.engine.describe() if fitted.engine is not None else
             [f"engine (stated): {cf.describe_cluster(runs[0])}", f"  {fitted.why}"])
    if fitted.trainer is not None:
        return [*lines, fitted.trainer.describe()]
    whose = "stated" if stated else "the default; --set sim.trainer_gpu=... for yours"
    return [*lines, f"trainer: not timed in the trace: {cf.describe_trainer(runs[0])} "
                    f"({whose})"]
