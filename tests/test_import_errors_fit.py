"""Refusals about imports fit a 100-column terminal, given a short path (a new user's
trial measured five at 120 to 201 columns: the same path said twice, a file pattern said
twice, every file of a folder listed, a sentence where a clause would do).

Each is one line, exit code 2 (the standard's form); only the path it names is the
user's length.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROLLOUTBENCH = str(Path(sys.executable).parent / "rolloutbench")
FIXTURES = Path(__file__).parent / "fixtures"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run([ROLLOUTBENCH, *args], capture_output=True, text=True, cwd=cwd,
                          env=env, stdin=subprocess.DEVNULL, check=False, timeout=120)


def polytrace(folder: Path) -> Path:
    folder.mkdir()
    for step in range(3):
        (folder / f"packed_lengths_step_{step}.jsonl").write_text(
            json.dumps({"step": step, "input": 100, "output": [100, 400]}) + "\n")
    return folder


def untimed(tmp_path: Path) -> None:
    assert cli("import", "polytrace", "pt", "-o", "p.jsonl", cwd=tmp_path).returncode == 0


CASES = {  # each: set-up in the folder, then the command
    "timeline of an untimed import": (untimed, ["timeline", "p.jsonl", "-o", "t.json"]),
    "gantt of an untimed import": (untimed, ["gantt", "p.jsonl", "-o", "g.png"]),
    "metrics --steps of an untimed import": (untimed, ["metrics", "--steps", "p.jsonl"]),
    "slime-perf given PolyTrace's folder": (None, ["import", "slime-perf", "pt", "-o", "s.jsonl"]),
    "verl without --tokenizer": (None, ["import", "verl", "v", "-o", "v.jsonl"]),
    "tinker given ROLL's folder": (None, ["import", "tinker", "roll", "-o", "k.jsonl"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_import_refusal_is_one_line_within_100_columns(tmp_path: Path, case: str) -> None:
    polytrace(tmp_path / "pt")
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "1.jsonl").write_text(json.dumps(
        {"input": "q", "output": "a", "score": 1.0, "step": 1}) + "\n")
    (tmp_path / "roll").symlink_to(FIXTURES / "roll", target_is_directory=True)
    setup, args = CASES[case]
    if setup is not None:
        setup(tmp_path)
    out = cli(*args, cwd=tmp_path)
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    assert len(lines[0]) <= 100, lines[0]
