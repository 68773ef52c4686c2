"""`reproduce --traces`: a reproduction's traces in the simulator's own form.

A simulated `rolloutbench run` writes trace.jsonl.zst; a reproduction's runs, when asked
to write their traces, write NAME.jsonl.zst the same way (`trace_io.trace_file`, the one
place that names them), and every reader reads them back. Progress lines name a run
without its trace suffix.
"""

from __future__ import annotations

import ast
import io
from pathlib import Path

import pytest
from rich.console import Console

from harness.core.config import RunConfig
from harness.core.trace import read_trace
from harness.core.trace_io import MAGIC, trace_file, trace_stem
from harness.studies.reproduce import pool
from harness.studies.reproduce.grid import grid_tasks, run_grid

ROOT = Path(__file__).resolve().parents[1]
BASE = RunConfig(workload="sci-jl", groups=4, rounds=2, group_size=4, seed=1)


def test_trace_file_takes_the_form_a_run_writes_by_default(tmp_path: Path) -> None:
    assert trace_file(tmp_path, "slime-sci-jl") == tmp_path / "slime-sci-jl.jsonl.zst"
    assert trace_file(tmp_path, "x", "live") == tmp_path / "x.jsonl"
    assert [trace_stem(n) for n in ("a-1.jsonl.zst", "a-1.jsonl", "a.zst", "a.txt")] == [
        "a-1", "a-1", "a", "a"]


def test_a_grid_names_its_traces_compressed(tmp_path: Path) -> None:
    tasks = grid_tasks(BASE, {"system": ("slime", "cgp"), "groups": (4,)}, tmp_path)
    assert [path.name for _, path in tasks] == ["slime-4.jsonl.zst", "cgp-4.jsonl.zst"]


def test_written_traces_are_zstd_and_read_back(tmp_path: Path) -> None:
    def paper(out: Path) -> list[int]:
        frame = run_grid(BASE, {"system": ("slime", "cgp")}, out / "traces", label="p")
        return [len(frame)]

    text = io.StringIO()
    done = pool.reproduce({"p": paper}, ["p"], {"out": tmp_path}, 1,
                          Console(file=text, width=100))
    assert done == {"p": [4]}  # 2 systems x 2 rounds
    written = sorted(p.name for p in (tmp_path / "traces").iterdir())
    assert written == ["cgp.jsonl.zst", "slime.jsonl.zst"]
    for name in written:
        path = tmp_path / "traces" / name
        assert path.read_bytes()[:4] == MAGIC
        events = read_trace(path, strict=True)
        assert events[0]["ev"] == "run_start" and events[-1]["ev"] == "run_end"
    runs = sorted(line for line in text.getvalue().splitlines() if line.startswith("["))
    assert [line.split(" (")[0] for line in runs] == ["[1/2] p: slime", "[2/2] p: cgp"]


def _typed_suffixes(path: Path) -> list[str]:
    """String pieces in `path` (f-strings' included) that end in a trace suffix."""
    return [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(ast.parse(
        path.read_text())) if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and node.value.endswith((".jsonl", ".jsonl.zst"))]


def test_no_reproduction_types_a_trace_suffix_of_its_own() -> None:
    files = [p for p in sorted((ROOT / "harness/studies/reproduce").rglob("*.py"))
             if p.name != "twin_cache.py"]  # its SUFFIXES: files it fingerprints, no trace
    files.append(ROOT / "harness/studies/counterfactual.py")
    assert [hit for path in files for hit in _typed_suffixes(path)] == []


def test_traces_go_under_out_not_the_current_folder(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # they went to ./runs/april whatever --out was (from the repository root: the checkout)
    from typer.testing import CliRunner

    from harness.cli.app import app

    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    out = tmp_path / "rep"
    done = CliRunner().invoke(app, ["reproduce", "april", "--traces", "--out", str(out),
                                    "--twin", "skip", "--jobs", "1"])
    assert done.exit_code == 0, done.output
    assert list(here.iterdir()) == []
    written = sorted((out / "runs" / "april").rglob("*.jsonl.zst"))
    assert len(written) == 24  # 2 algorithms x 2 models x baseline/april x 3 datasets
    assert f"traces: {out / 'runs'}" in " ".join(done.output.split())


def test_spec_papers_traces_go_under_out_too(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """spec-papers, added after the test above, still wrote ./runs/spec-papers (the
    checkout, run from its root) while saying `traces: OUT/runs/<paper>/`."""
    from typer.testing import CliRunner

    from harness.cli.app import app

    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    out = tmp_path / "rep"
    done = CliRunner().invoke(app, ["reproduce", "spec-papers", "--traces", "--out", str(out),
                                    "--twin", "skip", "--jobs", "1"])
    assert done.exit_code == 0, done.output
    assert list(here.iterdir()) == []
    written = sorted((out / "runs" / "spec-papers").rglob("*.jsonl.zst"))
    assert len(written) == 9  # EfficientRollout: 2 models x (no-sd, always-on, toggle); TLT 3


@pytest.mark.parametrize("paper", ["skyrl-spec", "spec-papers"])
def test_without_traces_no_folder_is_left(paper: str, tmp_path: Path) -> None:
    """`--traces` off: "nothing is left on disk" (its help), yet every paper made its
    runs' folders before knowing whether the traces were kept (findings-13, item 6:
    OUT/runs/skyrl-spec/{mtp,baseline}/, empty). A trace's folder is now made where the
    trace is written (harness.run.execute), so OUT holds the paper's tables alone."""
    from typer.testing import CliRunner

    from harness.cli.app import app

    out = tmp_path / "rep"
    done = CliRunner().invoke(app, ["reproduce", paper, "--out", str(out), "--twin", "skip",
                                    "--jobs", "1"])
    assert done.exit_code == 0, done.output
    assert not (out / "runs").exists()
    assert (out / "claims.csv").exists()


@pytest.mark.parametrize("kept", [True, False, None])
def test_profiles_are_written_beside_kept_traces_only(kept: bool | None,
                                                      tmp_path: Path) -> None:
    """areal and verl-async write the workload profiles their runs read; without --traces
    they went to OUT/runs/PAPER/profiles all the same (its files the only thing left on
    disk). Now: there when the traces are kept or no reproduction is under way (a test
    calling `simulate`), else a temporary folder removed once the runs are done."""
    traces = tmp_path / "runs" / "areal"
    runs = None if kept is None else pool.RunPool(None, traces=kept)  # type: ignore[arg-type]
    token = pool._ACTIVE.set(runs)
    try:
        with pool.profiles_folder(traces) as folder:
            if kept is False:
                (folder / "p.toml").write_text("x")  # a temporary folder, made for it
    finally:
        pool._ACTIVE.reset(token)
    if kept is False:
        assert not folder.is_relative_to(tmp_path) and not folder.exists()
    else:
        assert folder == traces / "profiles"  # made by the profile's writer, as before
    assert not (tmp_path / "runs").exists()
