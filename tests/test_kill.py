"""`kill` (SIGTERM) stops the long commands as Ctrl-C does, with a shell's exit code for
it, 143, and the word "terminated" (`run`'s: tests/test_trace_zst.py; `sweep`'s and
`whatif`'s, with their tables: tests/test_sweep.py, tests/test_whatif.py). Before,
`reproduce` and `validate` died at once, silent, a reproduction's forked workers running on.

In this process: a command that does not take SIGTERM meets the test's own handler,
which fails the test, not the test run."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import common
from harness.cli.app import app


@contextmanager
def _guarded() -> Iterator[None]:
    """SIGTERM fails the test unless the command took it; then the handler, and the
    flag a kill sets (`common.stop_code`), are put back for the tests after."""

    def unhandled(signum: int, frame: object) -> None:
        raise RuntimeError("SIGTERM not handled by the command")

    before = signal.signal(signal.SIGTERM, unhandled)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
        common._TERMINATED[0] = False


def _killed(*args: object, **kwargs: object) -> None:
    """The command's work, killed while under way."""
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(10)
    raise AssertionError("the kill did not stop the command")


@pytest.mark.parametrize(("module", "name", "args"), [
    ("harness.studies.reproduce", "run", ["reproduce", "april", "--twin", "skip", "--out"]),
    ("harness.studies.validate.gpu.run", "validate_gpu", ["validate", "gpu", "--out"]),
])
def test_kill_ends_a_command_with_143_terminated(module: str, name: str, args: list[str],
                                                 tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(f"{module}.{name}", _killed)
    with _guarded():
        result = CliRunner().invoke(app, [*args, str(tmp_path / "out")])
    assert result.exit_code == 143, result.output
    assert result.output.splitlines()[-1] == "error: terminated", result.output


def test_ctrl_c_is_still_interrupted_130(monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path) -> None:
    def ctrl_c(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("harness.studies.reproduce.run", ctrl_c)
    result = CliRunner().invoke(app, ["reproduce", "april", "--twin", "skip", "--out",
                                      str(tmp_path / "out")])
    assert result.exit_code == 130 and result.output.splitlines()[-1] == "error: interrupted"
