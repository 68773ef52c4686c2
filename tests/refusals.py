"""A `run` that bad input refuses (the project's rule): exit code 2, one line, no trace
written. Shared by the layout tests that each refuse one field."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from harness.cli.app import app


def run_refusal(tmp_path: Path, args: list[str]) -> str:
    """The one line a four-group, one-round `run` with these extra arguments is refused
    with; asserts exit 2 and that no trace was written (the refusal came before any work)."""
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "-R", "4", "--rounds", "1", "--out", str(out),
                                      *args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, lines
    assert not (out / "trace.jsonl").exists() and not (out / "trace.jsonl.zst").exists()
    return lines[0]
