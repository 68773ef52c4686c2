"""A trace cut by a kill (its last line cut mid-write) reads the same in every command
that reads a user's trace: the complete lines before the cut, and one warning that names
the cut line. Before, `metrics` refused it without `--partial` and `check`, `compare`,
`timeline`, `gantt`, `export-otlp`, `counterfactual` and `run --workload trace:` refused
it with no way to read it (docs/trace.md: a killed run leaves a valid prefix).

The cut trace: the golden slime run's first 300 of 456 lines (round 0 trained, round 1
under way), then half of line 301."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.core.trace import read_trace

GOLDEN = Path(__file__).parent / "golden" / "slime.jsonl"
KEEP = 300
CUT = f"line {KEEP + 1} was cut mid-write and is left out"


@pytest.fixture
def cut(tmp_path: Path) -> Path:
    lines = GOLDEN.read_text().splitlines(keepends=True)
    path = tmp_path / "cut.jsonl"
    path.write_text("".join(lines[:KEEP]) + lines[KEEP][: len(lines[KEEP]) // 2])
    return path


def invoke(*args: str) -> tuple[int, str, str]:
    done = CliRunner().invoke(app, list(args))
    return done.exit_code, done.stdout, done.stderr


def said_once(stderr: str) -> None:
    assert " ".join(stderr.split()).count(CUT) == 1, stderr


def test_metrics_reads_it_without_partial(cut: Path) -> None:
    code, out, err = invoke("metrics", str(cut), "--json")
    assert code == 0, err
    said_once(err)
    assert [r["incomplete"] for r in json.loads(out)] == [False, True]


def test_check_judges_it_and_says_the_line_was_cut(cut: Path) -> None:
    code, out, err = invoke("check", str(cut))
    assert code in (0, 1, 3) and err == "", err
    tail = " ".join(out.split())
    assert "the trace has no run_end (a run cut short?); its " + CUT in tail
    assert max(map(len, out.splitlines())) <= 100


def test_check_says_a_run_that_ended_in_an_error(tmp_path: Path) -> None:
    # a Ctrl-C'd run ends in run_end with its error: check said nothing of it
    lines = GOLDEN.read_text().splitlines(keepends=True)
    path = tmp_path / "int.jsonl"
    end = {"t": json.loads(lines[KEEP - 1])["t"], "ev": "run_end", "error": "interrupted"}
    path.write_text("".join(lines[:KEEP]) + json.dumps(end) + "\n")
    code, out, _ = invoke("check", str(path))
    assert 'the run ended with an error ("interrupted")' in " ".join(out.split())


def test_compare_reads_it(cut: Path) -> None:
    code, out, err = invoke("compare", str(GOLDEN), str(cut), "--json")
    assert code == 0, err
    said_once(err)
    assert json.loads(out)


@pytest.mark.parametrize(("command", "out"), [("timeline", "t.json"), ("gantt", "g.png")])
def test_timeline_and_gantt_draw_it(cut: Path, command: str, out: str) -> None:
    target = cut.parent / out
    code, _, err = invoke(command, str(cut), "-o", str(target))
    assert code == 0, err
    said_once(err)
    assert target.exists()


def test_export_otlp_exports_it(cut: Path) -> None:
    target = cut.parent / "x.json"
    code, _, err = invoke("export-otlp", str(cut), "--out", str(target))
    assert code == 0, err
    said_once(err)
    back = cut.parent / "back.jsonl"
    assert invoke("import", "otlp", str(target), "--out", str(back))[0] == 0
    assert read_trace(back) == read_trace(cut, allow_cut=True)  # the prefix, whole


def test_counterfactual_replays_it(cut: Path) -> None:
    out = cut.parent / "cf"
    code, _, err = invoke("counterfactual", str(cut), "--out", str(out), "--systems", "slime",
                          "--no-fit", "--set", "sim.model=qwen3-1.7b")
    assert code == 0, err
    said_once(err)
    assert (out / "counterfactual.csv").exists()


def test_a_run_replays_its_work(cut: Path) -> None:
    out = cut.parent / "r"
    code, _, err = invoke("run", "--system", "slime", "--workload", f"trace:{cut}", "-R", "8",
                          "-K", "8", "--rounds", "1", "--out", str(out))
    assert code == 0, err
    assert "no run_end (a run cut short?)" in " ".join(err.split())
