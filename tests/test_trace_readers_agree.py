"""Every command that reads a user's trace checks it as `metrics` does.

A field of the wrong type (one the metrics cannot use) is refused by each with the same
one line naming the file, the line and the field, exit code 2 and nothing written:
timeline, gantt and compare once read such a trace loosely and drew or compared it, and
trace-convert checked only its first line and copied the rest. A trace that is whole
but interrupted is still converted, with one warning.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.core.trace import SCHEMA

ROLLOUTBENCH = str(Path(sys.executable).parent / "rolloutbench")

HEAD = {"t": 0.0, "ev": "run_start", "schema": SCHEMA, "system": "slime", "workload": "w",
        "runtime": "sim", "seed": 0, "config": {}, "version": "0.1.0"}
START = {"t": 0.5, "ev": "rollout_start", "round": 0, "version": 0}
SUBMIT = {"t": 1.0, "ev": "request_submit", "round": 0, "group": 0, "sample": 0,
          "prompt_tokens": 9}
ADMIT = {"t": 1.5, "ev": "request_admit", "group": "abc", "sample": 0, "engine": 0}
FINISH = {"t": 2.0, "ev": "request_finish", "group": 0, "sample": 0, "response_tokens": 7,
          "status": "finished", "versions": [0, 0]}
END = {"t": 5.0, "ev": "run_end"}

# each command that reads one trace, with where it would write (None: it prints)
COMMANDS: dict[str, tuple[list[str], str | None]] = {
    "metrics": (["metrics", "t.jsonl"], None),
    "check": (["check", "t.jsonl"], None),
    "timeline": (["timeline", "t.jsonl", "-o", "out.json"], "out.json"),
    "gantt": (["gantt", "t.jsonl", "-o", "out.png"], "out.png"),
    "compare": (["compare", "t.jsonl", "t.jsonl"], None),
    "export-otlp": (["export-otlp", "t.jsonl", "-o", "out.json"], "out.json"),
    "trace-convert": (["trace-convert", "t.jsonl", "out.jsonl.zst"], "out.jsonl.zst"),
}


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run([ROLLOUTBENCH, *args], capture_output=True, text=True, cwd=cwd,
                          env=env, stdin=subprocess.DEVNULL, check=False, timeout=120)


def write(path: Path, *events: dict[str, Any]) -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_field_of_the_wrong_type_is_refused_alike(tmp_path: Path, command: str) -> None:
    args, written = COMMANDS[command]
    write(tmp_path / "t.jsonl", HEAD, START, SUBMIT, ADMIT, FINISH, END)
    out = cli(*args, cwd=tmp_path)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr.strip() == ("error: t.jsonl:4: request_admit field 'group' must be an "
                                  'integer, got "abc"'), out.stderr
    assert written is None or not (tmp_path / written).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl"]  # no part file either


def test_trace_convert_checks_past_the_first_line(tmp_path: Path) -> None:
    """A missing field deep in the file, not only a bad first line, stops the copy."""
    events = [HEAD, START] + [{**SUBMIT, "t": 1.0 + i, "sample": i} for i in range(50)]
    events.append({k: v for k, v in FINISH.items() if k != "status"} | {"t": 60.0})
    write(tmp_path / "t.jsonl", *events, {**END, "t": 61.0})
    out = cli("trace-convert", "t.jsonl", "out.jsonl.zst", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("error: t.jsonl:53: request_finish lacks field(s) 'status'")
    assert not (tmp_path / "out.jsonl.zst").exists()


def test_trace_convert_of_an_interrupted_run_warns_once_and_copies_it_whole(
        tmp_path: Path) -> None:
    lines = "".join(json.dumps(e) + "\n" for e in (HEAD, START, SUBMIT))
    (tmp_path / "t.jsonl").write_text(lines + json.dumps(FINISH)[:20])  # cut mid-write
    out = cli("trace-convert", "t.jsonl", "back.jsonl", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    warned = " ".join(out.stderr.split())
    assert warned.startswith("warning: t.jsonl: incomplete trace (no run_end"), warned
    assert "line 4 was cut mid-write" in warned and "line for line" in warned
    assert out.stderr.count("warning:") == 1
    assert (tmp_path / "back.jsonl").read_bytes() == (tmp_path / "t.jsonl").read_bytes()


def test_trace_convert_into_a_read_only_folder_is_one_line(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """On a read-only file system the write fails and so does the clean-up's `unlink` of
    the part never made (EROFS, not ENOENT): a user got the line, then a traceback from
    the clean-up, exit 1 (a new user's trial, on a read-only bind mount)."""
    import errno
    import pathlib

    from typer.testing import CliRunner

    import harness.core.trace_io as trace_io
    from harness.cli.app import app

    write(tmp_path / "t.jsonl", HEAD, START, SUBMIT, FINISH, END)

    def read_only(*_args: Any, **_kwargs: Any) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(trace_io, "convert", read_only)
    monkeypatch.setattr(pathlib.Path, "unlink", read_only)
    out = CliRunner().invoke(app, ["trace-convert", str(tmp_path / "t.jsonl"),
                                   str(tmp_path / "out.jsonl.zst")])
    assert out.exit_code == 2, out.output
    assert out.output.strip() == f"error: {tmp_path / 'out.jsonl.zst'}: cannot write " \
                                 "(Read-only file system)", out.output
