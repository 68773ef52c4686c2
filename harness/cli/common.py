"""What every command shares: the console, one-line failures, output formats,
help texts, and building a run's config from the options."""

from __future__ import annotations

import signal
from pathlib import Path

import typer
from rich.console import Console

from harness.core.config import RunConfig, apply, load_toml, set_path

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
    from harness.cli.tables import emit, metrics_table

    emit(console, rows, fmt, metrics_table)


def print_rows(rows: list[dict], fmt: str = "table") -> None:
    """Any rows with the same keys: a table, or JSON/CSV."""
    from harness.cli.tables import emit, rows_table

    emit(console, rows, fmt, rows_table)


def output_format(json_out: bool, csv_out: bool) -> str:
    """'table', 'json' or 'csv'; both flags at once is a one-line error."""
    from harness.cli.tables import pick_format

    try:
        return pick_format(json_out, csv_out)
    except ValueError as err:
        fail(str(err))
    raise AssertionError  # unreachable: fail() exits


JSON_HELP = "Print the rows as JSON (every field, full precision)."


CSV_HELP = "Print the rows as CSV (every field, full precision)."


def build_config(config: Path | None, sets: list[str], start: RunConfig | None = None,
                 **options: object) -> RunConfig:
    """Defaults (`start`'s, or RunConfig's), then the TOML file, then named options,
    then --set overrides; then the whole config is checked (`harness.run.checks`)."""
    cfg = start if start is not None else RunConfig()
    if config is not None:
        apply(cfg, load_toml(config))
    steps = options.pop("steps_per_rollout", None)
    ray_address = options.pop("ray_address", None)
    sim = {"model": options.pop("model", None), "rollout_gpu": options.pop("gpu", None)}
    apply(cfg, {k: v for k, v in options.items() if v is not None})
    if ray_address is not None:
        cfg.live.ray_address = str(ray_address)
    if any(v is not None for v in sim.values()):  # run's --model and --gpu
        apply(cfg, {"sim": {k: v for k, v in sim.items() if v is not None}})
    for assignment in sets:
        set_path(cfg, assignment)
    if steps is not None:  # R = G x U; an R given beside it must agree
        from harness.run.knob_check import steps_to_groups

        steps_to_groups(cfg, steps, options.get("groups"), sets)
    from harness.run.checks import check_run

    return check_run(cfg)


def _interrupt(signum: int, frame: object) -> None:
    """`kill` is Ctrl-C: whatever handles SIGINT now handles it (during a simulated
    run, asyncio's Runner, which cancels the run's task instead of raising mid-step)."""
    handler = signal.getsignal(signal.SIGINT)
    if not callable(handler):
        raise KeyboardInterrupt
    handler(signal.SIGINT, frame)  # type: ignore[arg-type]
