"""The CLI as the analysis tests call it (test_analysis.py, test_compare.py; the runs they
read are conftest.py's `traces`)."""

from __future__ import annotations

from typing import Any

from typer.testing import CliRunner

from harness.cli.app import app


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args])
