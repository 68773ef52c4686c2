"""Bad input ends every command the same way: one line on stderr, exit code 2.

Why a group class: commands raise `ConfigError` / `UnknownName` from deep inside
(a preset, a calibration file, a sweep cell), and catching them in each command
is how some were missed. `OneLineErrors` is the app's command group, so every
command, and every one added later, has the same net: those errors, and an
`OSError` about a path the user typed, become `error: ...` and exit 2; so does a
module of systems/ that fails as it is imported (a user's own system: its file and
line). Ctrl-C becomes `error: interrupted` and exit 130 (`kill`, in a command that
takes it as Ctrl-C, `error: terminated` and 143). Anything else is a bug and
keeps its traceback.

Click's own usage errors (a missing option, `-R abc`, a misspelt option or command,
a missing argument) are caught here too, where they arise: the group's own options
in `parse_args`, every command's (and every subgroup's) in `invoke`, which makes the
command's context. Typer would draw them as a 5-6 line box; here each is one line
that names the command's `--help`.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import traceback
from pathlib import Path
from typing import Any, NoReturn

import typer
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer.core import TyperGroup

from harness.core.config import ConfigError
from harness.core.notes import shown_path
from harness.core.registry import UnknownName

ARGV = "rolloutbench.argv"


def _inside(path: Path, given: Path) -> bool:
    """`path` is `given` or lies in it; a `given` that holds the working folder
    ('.', '..') is too broad to blame for anything."""
    path, given = Path(os.path.abspath(path)), Path(os.path.abspath(given))
    here = Path(os.getcwd())
    if given == here or given in here.parents:
        return False
    return path == given or given in path.parents


def user_path(err: OSError, argv: list[str]) -> str | None:
    """'--out x' (the option and the value typed) when `err` is about a path the
    user typed or one inside it; None when it is about any other path."""
    names = [n for n in (err.filename, err.filename2) if isinstance(n, str | os.PathLike)]
    for i, token in enumerate(argv):
        option, value = (token.split("=", 1) if token.startswith("--") and "=" in token
                         else (argv[i - 1] if i and argv[i - 1].startswith("-") else "",
                               token))
        if not value or value.startswith("-"):
            continue
        if any(_inside(Path(name), Path(value)) for name in names):
            return f"{option} {value}".strip()
    return None


class OneLineErrors(TyperGroup):
    """The app's group: bad input anywhere below it is one line and exit 2."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        ctx.meta[ARGV] = list(args)
        try:
            return super().parse_args(ctx, args)
        except NoArgsIsHelpError:  # no arguments: help, as asked
            raise
        except UsageError as err:
            _fail(usage_line(err))

    def invoke(self, ctx: Any) -> Any:
        if getattr(signal.getsignal(signal.SIGINT), "rolloutbench_startup", False):
            signal.signal(signal.SIGINT, signal.default_int_handler)  # see harness.main
        try:
            return super().invoke(ctx)
        except NoArgsIsHelpError:  # a bare subgroup (`config`): its help, as asked
            raise
        except UsageError as err:
            _fail(usage_line(err))
        except (ConfigError, UnknownName) as err:
            _fail(str(err))
        except OSError as err:
            where = user_path(err, ctx.meta.get(ARGV, []))
            if where is None:
                raise
            name = str(err.filename2 or err.filename)
            detail = "" if where.endswith(f" {name}") or where == name else f" ({name})"
            _fail(f"{where}: {err.strerror or err}{detail}")
        except KeyboardInterrupt:  # Ctrl-C, or `kill` where the command takes it so
            from harness.cli.common import stop_code

            code, word = stop_code()
            typer.echo(f"error: {word}", err=True)
            raise typer.Exit(code) from None
        except Exception as err:  # a system's module that fails as it is imported
            line = import_failure(err)
            if line is None:
                raise
            if os.environ.get("ROLLOUTBENCH_TRACEBACK"):
                traceback.print_exception(err)
            _fail(line)


def import_failure(err: BaseException) -> str | None:
    """A module under systems/ that failed as it was imported (a user's own system with a
    syntax error, an import that fails, a bad class body), as 'FILE:LINE: Type: text':
    every command that loads the systems would otherwise print its traceback. None for
    any other error (a bug keeps its traceback)."""
    spec = importlib.util.find_spec("systems")  # found, not imported (it is what failed)
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(os.path.abspath(next(iter(spec.submodule_search_locations))))

    def inside(name: str | None) -> str | None:
        path = Path(os.path.abspath(name)) if name else None
        return shown_path(str(path)) if path is not None and root in path.parents else None

    if isinstance(err, SyntaxError) and (path := inside(err.filename)):
        return f"{path}:{err.lineno}: {type(err).__name__}: {err.msg}"
    for frame in reversed(traceback.extract_tb(err.__traceback__)):
        if frame.name == "<module>" and (path := inside(frame.filename)):
            text = next((t.strip() for t in str(err).splitlines() if t.strip()), "")
            return f"{path}:{frame.lineno}: {type(err).__name__}: {text}"
    return None


def usage_line(err: UsageError) -> str:
    """A click usage error as one line: click's message with its line breaks undone,
    then where the command's options are listed. A value the option's type refuses
    ("Invalid value for '--groups' / '-R': Input should be a valid integer, unable to
    parse string as an integer": 145 columns in all) is said as "'--groups' / '-R':
    should be a valid integer", its second clause dropped where the line would pass 100."""
    text = " ".join(err.format_message().split())
    refused = re.match(r"Invalid value for (.+?): Input (should be .+)", text)
    path = err.ctx.command_path if err.ctx is not None else "rolloutbench"
    if refused:
        option, rule = refused.groups()
        text = f"{option}: {rule}"
        if len(f"error: {text} (see '{path} --help')") > 100:
            text = f"{option}: {rule.split(', ', 1)[0]}"
    return f"{text} (see '{path} --help')"


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)
