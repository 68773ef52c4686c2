"""`rolloutbench counterfactual`: every system on exactly one run's work."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import CSV_HELP, JSON_HELP, build_config, console, fail, output_format

commands = typer.Typer()  # added to the app in harness/cli/app.py


def _names_u(config: Path | None, sets: list[str]) -> bool:
    """U was given: in the config file (a `plan` best/*.toml has it) or by --set."""
    from harness.core.config import load_toml

    given = config is not None and "update_groups" in load_toml(config)
    return given or any(s.split("=", 1)[0].strip() == "update_groups" for s in sets)


@commands.command("counterfactual")
def counterfactual_cmd(
    trace: Annotated[Path, typer.Argument(help="A trace: `rolloutbench import`'s, or any "
                                          "run's.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for counterfactual.csv, "
                                      "counterfactual.png and the runs' traces.")],
    systems: Annotated[str, typer.Option(
        help="Comma-separated systems (see `systems`).")] = "all",
    update_groups: Annotated[int | None, typer.Option(
        "--update-groups", "-U", help="Groups per optimizer update U \\[default: --config's or "
                                      "--set's, else the trace's groups per round: one "
                                      "update per round].")]
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
) -> None:
    """Replay one run's work (its lengths, rewards and, where recorded, check latencies)
    under every system on the simulator, on the cluster you state, for as many rounds
    as the trace holds. A timed trace's own metrics come first, with the simulated twin
    of the system that wrote it and its error beside them."""
    from harness.cli.tables import counterfactual_table, emit, to_csv
    from harness.core.config import ConfigError
    from harness.core.files import write_atomic
    from harness.core.registry import UnknownName
    from harness.core.trace import TraceError
    from harness.studies import counterfactual as cf
    from systems import SYSTEMS
    from workloads.trace_source import TraceWorkloadError

    fmt = output_format(json_out, csv_out)
    names = list(SYSTEMS) if systems == "all" else [s.strip() for s in systems.split(",")]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown or not names:
        fail(f"--systems: unknown system {', '.join(unknown) or '(none)'} "
             f"(one of {', '.join(SYSTEMS)})")
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
    if (out / "counterfactual.csv").exists() and not force:
        fail(f"--out: {out} holds a counterfactual already (--force overwrites it)")
    try:
        base = build_config(config, set_ or [])
        if update_groups is None and _names_u(config, set_ or []):
            update_groups = base.update_groups  # the file's or --set's U, not one per round
        cf.configs(trace, base, names, update_groups)  # every check before any run
    except (ConfigError, UnknownName, TraceError, TraceWorkloadError) as err:
        hint = (" (not a rolloutbench trace? `rolloutbench import` reads other systems' "
                "logs)") if "missing field 'ev'" in str(err) else ""
        fail(f"{err}{hint}")
    said = "" if config or set_ else " (the defaults: --set sim.FIELD=... or --config)"
    typer.echo(f"cluster: {cf.describe_cluster(base)}{said}", err=True)
    rows = cf.run(trace, base, names, out, update_groups, progress=fmt == "table")
    write_atomic(out / "counterfactual.csv", to_csv(rows))
    cf.figure(rows, out / "counterfactual.png", f"{trace.name}: every system on its work")
    emit(console, rows, fmt, counterfactual_table)
    if fmt == "table":
        console.print(f"wrote {out / 'counterfactual.csv'} and {out / 'counterfactual.png'}",
                      highlight=False)
