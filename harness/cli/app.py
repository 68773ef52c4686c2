"""The `rolloutbench` typer app, assembled in one place: each command module owns its
`commands` (a Typer); here they are added in the order `--help` lists them."""

from __future__ import annotations

import typer

from harness.cli import (
    analysis,
    config,
    counterfactual,
    imports,
    live,
    plan,
    regress,
    reproduce,
    run,
    steps,
    sweep,
    whatif,
)
from harness.cli.errors import OneLineErrors

app = typer.Typer(
    cls=OneLineErrors,  # bad input in any command: one line, exit 2
    help="Benchmark and reproduce the scheduling of LLM RL with verifiable rewards.",
    no_args_is_help=True,
    add_completion=False,
)

# -- the commands, in the order `--help` lists them (written by restructure.py) --
MODULES = (run, reproduce, steps, imports, counterfactual, analysis, config, live, regress,
           sweep, whatif, plan)
for _module in MODULES:  # every command first, then the groups (config, data, ...)
    app.registered_commands.extend(_module.commands.registered_commands)
for _module in MODULES:
    app.registered_groups.extend(_module.commands.registered_groups)
# -- end of the commands --


def main() -> None:  # pragma: no cover
    app()
