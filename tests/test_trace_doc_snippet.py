"""docs/trace.md's notebook snippet runs as written on a trace `run` writes, and its
frame holds what the validated reader gives: the same events, the same finishes.

Why: a snippet in the docs is the first code a user copies; one that drifted from the
trace's form (its file name, a field) would fail them on their first line."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

from typer.testing import CliRunner

from harness.cli.app import app
from harness.core.trace import read_trace

DOC = Path(__file__).resolve().parents[1] / "docs" / "trace.md"


def snippet() -> str:
    text = DOC.read_text()
    section = text[text.index("## In a notebook"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


def test_the_notebook_snippet_runs_on_a_run_s_trace(tmp_path: Path) -> None:
    out = CliRunner().invoke(app, ["run", "--system", "cgp", "--workload", "lsat-ar", "-R",
                                   "8", "-K", "4", "--rounds", "2", "--out",
                                   str(tmp_path / "runs" / "cgp")])
    assert out.exit_code == 0, out.output
    code = snippet()
    assert "runs/cgp/trace.jsonl.zst" in code
    printed = io.StringIO()
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        scope: dict = {}
        with contextlib.redirect_stdout(printed):
            exec(compile(code, str(DOC), "exec"), scope)  # noqa: S102  (the doc's own code)
    finally:
        os.chdir(here)
    events = read_trace(tmp_path / "runs" / "cgp" / "trace.jsonl.zst", strict=True)
    assert len(scope["events"]) == len(events)
    assert list(scope["events"]["ev"]) == [e["ev"] for e in events]
    finishes = [e for e in events if e["ev"] == "request_finish"]
    assert list(scope["finished"]["response_tokens"]) == [e["response_tokens"] for e in finishes]
    assert "finished" in printed.getvalue() and "request_submit" in printed.getvalue()
