"""`rolloutbench config show`: every config field with its resolved value, type,
where the value came from, and its help text (the fields' metadata in
harness/core/config.py)."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from harness.cli.common import CSV_HELP, JSON_HELP, build_config, console, fail, output_format
from harness.cli.tables import terminal_width
from harness.core.config import ConfigError, RunConfig, help_of
from harness.core.config_io import config_fields, load_toml, type_name
from harness.core.registry import UnknownName

commands = typer.Typer()  # added to the app in harness/cli/app.py

config_app = typer.Typer(help="The run configuration: every field, its value, type and help.",
                         no_args_is_help=True)
commands.add_typer(config_app, name="config")


def _keys(tree: dict[str, Any], prefix: str = "") -> set[str]:
    """Dotted names of the leaves of a nested dict (a config file's tables)."""
    out: set[str] = set()
    for key, value in tree.items():
        if isinstance(value, dict):
            out |= _keys(value, f"{prefix}{key}.")
        else:
            out.add(f"{prefix}{key}")
    return out


def field_rows(cfg: RunConfig, from_file: Collection[str] = (),
               from_set: Collection[str] = ()) -> list[dict[str, Any]]:
    """One row per leaf field: name, type, value, source and help. Unset calibrated
    simulator parameters show the calibration's value (source `calibration`)."""
    calibrated: dict[str, float] = {}
    neutral = None  # a neutral train_mfu in place of the calibration's (trainer_mfu)
    data: dict[str, Any] = {}
    if cfg.runtime == "sim":
        from harness.sim import trainer_mfu
        from harness.sim.calibration import load, resolve
        from harness.sim.trainer import speed

        calibrated = resolve(cfg.sim)
        data = load(cfg.sim.calibration)
        neutral = trainer_mfu.assumed(cfg.sim, data, 0.0)
    defaults = {name: value for name, _, value in config_fields(RunConfig())}
    rows = []
    for name, f, value in config_fields(cfg):
        short = name.removeprefix("sim.")
        if name in from_set:
            source = "--set"
        elif name in from_file:
            source = "--config"
        elif value is None and name.startswith("sim.") and short in calibrated:
            value, source = calibrated[short], f"calibration {cfg.sim.calibration}"
            if short == "train_mfu" and neutral is not None:  # not the calibration's GPU
                source = f"neutral prior for {neutral.gpu}"
            elif short in speed.NAMES and not speed.calibrated(cfg.sim, data, short):
                source = (f"{speed.framework_of(data)}'s measured constant"
                          if short == "train_scale" else "default")
        elif value != defaults[name]:
            source = "resolved"  # filled in from another field (e.g. the workload's cap)
        else:
            source = "default"
        rows.append({"field": name, "type": type_name(f), "value": value, "source": source,
                     "help": help_of(f)})
    return rows


def _show(value: Any) -> str:
    """A value as it is written in a TOML file."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return "(unset)" if value is None else str(value)


@config_app.command("show")
def show_cmd(
    config: Annotated[Path | None, typer.Option(help="TOML file with any config fields.")]
    = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="Override: section.field=value (repeatable).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    csv_out: Annotated[bool, typer.Option("--csv", help=CSV_HELP)] = False,
) -> None:
    """Every config field with its resolved value (defaults, then --config, then
    --set, validated as `run` does), its type, where the value came from, and what
    it means."""
    sets = set_ or []
    fmt = output_format(json_out, csv_out)
    try:
        cfg = build_config(config, sets)
        from_file = _keys(load_toml(config)) if config is not None else set()
    except (ConfigError, UnknownName) as err:
        fail(str(err))
    from_set = {a.split("=", 1)[0].strip() for a in sets}
    rows = field_rows(cfg, from_file, from_set)
    if fmt == "json":
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    if fmt == "csv":
        from harness.cli.tables import to_csv

        sys.stdout.write(to_csv(rows))
        return
    sections = {f.name: help_of(f) for f in dataclasses.fields(RunConfig)
                if dataclasses.is_dataclass(f.default_factory)}
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1), header_style="bold")
    widest = {"value": 18, "source": 12}  # names whole, the help takes the rest
    for col in ("field", "value", "source", "help (type)"):
        table.add_column(col, overflow="fold", no_wrap=col == "field",
                         max_width=widest.get(col))
    section = ""
    for row in rows:
        if "." in row["field"] and row["field"].split(".")[0] != section:
            section = row["field"].split(".")[0]
            table.add_row(Text(section, style="bold"), "", "",
                          Text(f"{sections.get(section, '')} (table)"))
        name = row["field"]  # under its table's row, a table's field by its own name
        cells = ("  " + name.split(".", 1)[1] if "." in name else name, _show(row["value"]),
                 row["source"],
                 f"{row['help']} ({row['type']})")
        table.add_row(*map(Text, cells))  # plain text: "[sim]" is not markup
    console.print(table, width=terminal_width(console))  # the help takes a wide terminal
