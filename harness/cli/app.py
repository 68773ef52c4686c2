"""The `rolloutbench` typer app, assembled in one place: each command module owns its
`commands` (a Typer); here they are added in the order `--help` lists them."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated

import typer

from harness.cli import (
    analysis,
    check,
    config,
    counterfactual,
    forms,
    imports,
    live,
    plan,
    regress,
    reproduce,
    run,
    steps,
    sweep,
    traces,
    whatif,
)
from harness.cli.common import fail
from harness.cli.errors import OneLineErrors

app = typer.Typer(
    cls=OneLineErrors,  # bad input in any command: one line, exit 2
    help="Benchmark and reproduce the scheduling of LLM RL with verifiable rewards.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _options(presets: Annotated[Path | None, typer.Option(
        help="Your own GPU and model presets (TOML: \\[gpus.NAME], \\[models.NAME]) \\[default: "
             "$ROLLOUTBENCH_PRESETS, else ~/.config/rolloutbench/presets.toml].")] = None,
             ) -> None:
    """Benchmark and reproduce the scheduling of LLM RL with verifiable rewards."""
    if presets is not None:
        if not presets.is_file():
            fail(f"--presets: {presets}: no such file")
        os.environ["ROLLOUTBENCH_PRESETS"] = str(presets)  # read where presets are loaded
    from harness.core.config import ConfigError
    from harness.sim.presets import check_user_file, user_presets_path

    mine = user_presets_path()
    if mine.is_file():  # its tables' fields are checked as a preset is loaded
        try:
            check_user_file(mine)
        except ConfigError as err:
            fail(str(err))

# -- the commands, in the order `--help` lists them (written by restructure.py) --
MODULES = (run, reproduce, steps, imports, counterfactual, analysis, check, traces, config,
           live, regress, sweep, whatif, forms, plan)
for _module in MODULES:  # every command first, then the groups (config, data, ...)
    app.registered_commands.extend(_module.commands.registered_commands)
for _module in MODULES:
    app.registered_groups.extend(_module.commands.registered_groups)


def _first_sentence(doc: str) -> str:
    """A docstring's first sentence on one line: `--help`'s list of commands keeps the
    docstring's own line breaks, which cut sentences mid-way in any other width."""
    text = " ".join(doc.split("\n\n")[0].split())
    end = re.search(r"\.\s+(?=[A-Z`])", text)  # a full stop before a new sentence
    return text if end is None else text[:end.start() + 1]


for _info in app.registered_commands:
    if _info.short_help is None and _info.callback is not None and _info.callback.__doc__:
        _info.short_help = _first_sentence(_info.callback.__doc__)
# -- end of the commands --


def main() -> None:  # pragma: no cover
    app()
