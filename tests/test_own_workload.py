"""A researcher's own workload, with no edit to the package: a profile file by path
(`--workload profile:PATH` or `PATH.toml`), and a dataset of their own (JSON lines of
prompt, answer and verifier) measured into such a file by `python -m workloads.measure
--own`, the code that measures the shipped datasets."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from harness.cli.app import app

PROFILES = Path(__file__).parents[1] / "workloads" / "profiles"
SMALL = ["--system", "slime", "-R", "4", "-K", "2", "-U", "2", "--rounds", "1", "--json"]


def invoke(*args: object) -> object:
    return CliRunner().invoke(app, [str(a) for a in args])


def test_run_takes_a_profile_file_by_path(tmp_path: Path) -> None:
    mine = tmp_path / "mine.toml"
    mine.write_text((PROFILES / "sci-jl.toml").read_text().replace('name = "sci-jl"',
                                                                   'name = "mine"'))
    for name in (f"profile:{mine}", str(mine)):
        out = tmp_path / f"run{len(name)}"
        result = invoke("run", "--workload", name, *SMALL, "--out", out)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)[0]["workload"] == name
    missing = invoke("run", "--workload", f"profile:{tmp_path / 'none.toml'}", *SMALL,
                     "--out", tmp_path / "never")
    assert missing.exit_code == 2 and "none.toml: no such file" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1 and not (tmp_path / "never").exists()
