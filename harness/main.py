"""The `rolloutbench` entry point.

Why not `harness.cli.app:app` itself: loading the commands takes a good part of a
second, and Ctrl-C in that time would print Python's traceback. Here SIGINT is
first a quiet exit (one line, code 130); the command group puts Python's own
handler back as a command starts (`harness.cli.errors.OneLineErrors`), from
where Ctrl-C is each command's to handle. Only the standard library is
imported before the handler is in place.
"""

from __future__ import annotations

import signal
import sys


def _quiet(signum: int, frame: object) -> None:
    sys.stderr.write("error: interrupted\n")
    raise SystemExit(130)


_quiet.rolloutbench_startup = True  # type: ignore[attr-defined]


def main() -> None:
    signal.signal(signal.SIGINT, _quiet)
    from harness.cli.app import app

    app()


if __name__ == "__main__":  # `python -m harness.main ARGS`, as `rolloutbench ARGS`
    main()
