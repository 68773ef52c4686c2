"""No command overwrites a file it reads: `check T --json T` and `timeline T -o T` once
replaced the trace they read and exited 0. Every command that writes asks one helper
(`harness.cli.common.refuse_overwrite`, as `import` did first) before any work: one line
naming the option and the input, exit 2, the input byte for byte as it was."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.core.files import overwrites

GOLDEN = Path(__file__).parent / "golden" / "cgp.jsonl"


def refused(argv: list[object], *inputs: Path) -> str:
    """Run the command; assert exit 2, one line, and every input unchanged."""
    before = [p.read_bytes() for p in inputs]
    result = CliRunner().invoke(app, [str(a) for a in argv])
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert [p.read_bytes() for p in inputs] == before
    return lines[0]


@pytest.fixture
def trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    shutil.copy(GOLDEN, tmp_path / "t.jsonl")
    return Path("t.jsonl")


def test_check_and_timeline_refuse_to_write_over_their_trace(trace: Path) -> None:
    assert refused(["check", trace, "--json", trace], trace) == (
        "error: --json t.jsonl: would overwrite TRACE t.jsonl, which this command reads; "
        "write elsewhere")
    assert refused(["timeline", trace, "-o", trace], trace).startswith(
        "error: --out t.jsonl: would overwrite TRACE t.jsonl")
    Path("metrics.json").write_text("{}\n")  # an existing file: kept, unless --force
    assert refused(["timeline", trace, "-o", "metrics.json"], trace) == (
        "error: --out: metrics.json exists (--force overwrites it)")
    assert Path("metrics.json").read_text() == "{}\n"
    assert refused(["timeline", trace, "-o", "t.txt"], trace) == (
        "error: --out: t.txt: the trace-event format is one JSON document; name it .json")
    os.link(trace, "g.png")  # another name of the same file: still the trace
    assert "would overwrite TRACE t.jsonl" in refused(["gantt", trace, "-o", "g.png"], trace)


def test_plot_refuses_a_link_to_its_results(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("r.csv").write_text("groups,waiting_ratio\n1,0.5\n2,0.4\n")
    Path("p.png").symlink_to("r.csv")
    assert "would overwrite RESULTS r.csv" in refused(
        ["plot", "r.csv", "--x", "groups", "--y", "waiting_ratio", "-o", "p.png"],
        Path("r.csv"))


def test_folder_writers_refuse_an_input_among_what_they_write(trace: Path) -> None:
    """A folder command refuses an input only where it writes: the run's trace replayed
    into the same folder, a previous counterfactual's run replayed into its folder."""
    Path("o").mkdir()
    shutil.copy(trace, "o/trace.jsonl")
    assert refused(["run", "--out", "o", "--workload", "trace:o/trace.jsonl", "--force",
                    "--system", "cgp", "-R", "4"], Path("o/trace.jsonl")) == (
        "error: --out o: would overwrite --workload o/trace.jsonl, which this command reads; "
        "write elsewhere")
    Path("cf/runs").mkdir(parents=True)
    shutil.copy(trace, "cf/runs/slime.jsonl")
    assert "would overwrite TRACE cf/runs/slime.jsonl" in refused(
        ["counterfactual", "cf/runs/slime.jsonl", "--out", "cf", "--force"],
        Path("cf/runs/slime.jsonl"))
    Path("v").mkdir()
    Path("v/calibration.toml").write_text("[engine]\n")
    assert "would overwrite --calibration v/calibration.toml" in refused(
        ["validate", "--calibration", "v/calibration.toml", "--out", "v", "--force"],
        Path("v/calibration.toml"))
    Path("s/cells").mkdir(parents=True)
    Path("s/cells/spec.toml").write_text('[base]\nworkload = "sci-jl"\n')
    assert "would overwrite SPEC s/cells/spec.toml" in refused(
        ["sweep", "s/cells/spec.toml", "--out", "s"], Path("s/cells/spec.toml"))
    assert "would overwrite --model p/best/m.json" in refused(
        ["plan", "--out", "p", "--model", "p/best/m.json", "--gpus", "8", "--gpu",
         "h100-sxm", "--workload", "lsat-ar"])


def test_a_folder_writer_keeps_inputs_it_does_not_write(trace: Path) -> None:
    """counterfactual writes counterfactual.csv/.png, twin-engine.toml and runs/: a run's
    own trace.jsonl beside them is no overwrite (a run's folder is where one puts it)."""
    assert overwrites("--out", "o", [("TRACE", "o/trace.jsonl")],
                      ("counterfactual.csv", "counterfactual.png", "twin-engine.toml",
                       "runs/")) is None
    assert overwrites("--out", "o", [("TRACE", "o/runs/a/b.jsonl")], ("runs/",)) is not None
    assert overwrites("--json", None, [("TRACE", "t.jsonl")]) is None  # nothing written


def test_measure_own_refuses_to_write_its_profile_over_the_dataset(tmp_path: Path) -> None:
    import contextlib
    import io

    from workloads.measure import main

    data = tmp_path / "mine.jsonl"
    data.write_text('{"prompt": "What is 2 + 3?", "answer": "5", "verifier": "math"}\n')
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["--own", str(data), "--out", str(data), "--force"])
    assert code == 2 and err.getvalue() == (
        f"error: --out {data}: would overwrite --own {data}, which this command reads; "
        "write elsewhere\n")
    assert data.read_text().startswith('{"prompt"')


@pytest.mark.parametrize(("argv", "option"), [
    (["check", GOLDEN, "--json", "{f}/x.json"], "--json"),
    (["gantt", GOLDEN, "-o", "{f}/x.png"], "--out"),
    (["export-otlp", GOLDEN, "-o", "{f}/deeper/x.json"], "--out")])
def test_a_file_where_the_output_s_folder_is_due_is_not_a_directory(
        tmp_path: Path, argv: list[object], option: str) -> None:
    """`check --json runs/afile/x.json`, runs/afile a file, said "cannot write (File
    exists)", as if the output were there (a new user's trial)."""
    afile = tmp_path / "afile"
    afile.write_text("kept\n")
    line = refused([str(a).format(f=afile) for a in argv], afile)
    assert line.startswith(f"error: {option}: {afile}/") and line.endswith(
        ": cannot write (Not a directory)"), line
