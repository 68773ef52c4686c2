"""Systems from other packages through the `rolloutbench.systems` entry points.

Each test installs a package the way pip would leave it on sys.path (a module and
a dist-info folder holding entry_points.txt) in a temporary folder, and runs the
command line in a fresh process with that folder on PYTHONPATH, as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PLUGIN = '''
from systems.slime import Slime


class Mine(Slime):
    """Slime's schedule under another name: the smallest plugin there is."""

    name = "mine"
    summary = "a plugin: slime under another name"


class Clash(Slime):
    summary = "reuses a built-in name"


class NoRun:
    name = "norun"
    summary = "lacks run"
    knobs = ()
'''


def install(root: Path, entries: dict[str, str]) -> None:
    """A package `my_plugin` with its entry points, as an installer writes them."""
    root.mkdir(parents=True)
    (root / "my_plugin.py").write_text(PLUGIN)
    info = root / "my_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-plugin\nVersion: 0.1\n")
    lines = "\n".join(f"{name} = {target}" for name, target in entries.items())
    (info / "entry_points.txt").write_text(f"[rolloutbench.systems]\n{lines}\n")


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-c", "from harness.main import main; main()",
                           *args], env=env,
                          capture_output=True, text=True, timeout=300)


SMALL = ["--workload", "sci-jl", "-R", "4", "-K", "2", "-U", "2", "--rounds", "2", "--json"]


def test_a_plugin_system_is_listed_and_runs_as_a_builtin_would(tmp_path: Path) -> None:
    install(tmp_path / "site", {"mine": "my_plugin:Mine"})
    listed = cli(tmp_path / "site", "systems")
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr
    assert any(line.split()[:1] == ["mine"] for line in listed.stdout.splitlines())
    mine = cli(tmp_path / "site", "run", "--system", "mine", *SMALL, "--out", str(tmp_path / "m"))
    slime = cli(tmp_path / "site", "run", "--system", "slime", *SMALL,
                "--out", str(tmp_path / "s"))
    assert mine.returncode == 0 and slime.returncode == 0, mine.stderr + slime.stderr
    ours, theirs = json.loads(mine.stdout), json.loads(slime.stdout)
    assert [r["system"] for r in ours] == ["mine", "mine"]
    # the same schedule: every figure equal, only the name differs
    assert [{**r, "system": "slime"} for r in ours] == theirs


def test_a_broken_plugin_is_named_and_skipped(tmp_path: Path) -> None:
    install(tmp_path / "site", {"mine": "my_plugin:Mine", "gone": "my_plugin:Missing",
                                "norun": "my_plugin:NoRun", "slime": "my_plugin:Clash",
                                "other": "my_plugin:Mine"})
    listed = cli(tmp_path / "site", "systems")
    assert listed.returncode == 0
    warnings = listed.stderr.splitlines()
    assert len(warnings) == 4, listed.stderr
    assert any(w.startswith("warning: system plugin gone = my_plugin:Missing: failed to load:")
               for w in warnings)
    assert any("norun" in w and "not a system (no run)" in w for w in warnings)
    assert any("slime = my_plugin:Clash" in w and "taken by systems.slime" in w
               for w in warnings)
    assert any("other = my_plugin:Mine" in w and "differs from the entry point" in w
               for w in warnings)
    names = [line.split()[0] for line in listed.stdout.splitlines() if line.strip()]
    assert "mine" in names and "gone" not in names and "norun" not in names
    assert names.count("slime") == 1


def test_asking_for_a_skipped_plugin_says_it_was_skipped_and_why(tmp_path: Path) -> None:
    """Not "unknown system" (its warning scrolled away, a user reads that the name is
    wrong): the name is an installed plugin's, skipped, and why (a new user's trial)."""
    install(tmp_path / "site", {"norun": "my_plugin:NoRun"})
    out = cli(tmp_path / "site", "run", "--system", "norun", *SMALL, "--out", str(tmp_path / "n"))
    assert out.returncode == 2, out.stderr
    error = out.stderr.splitlines()[-1]
    assert error.startswith("error: --system: system 'norun' is an installed plugin that was "
                            "skipped: "), out.stderr
    assert "not a system (no run)" in error and not (tmp_path / "n").exists()
    typo = cli(tmp_path / "site", "run", "--system", "slim", *SMALL, "--out", str(tmp_path / "t"))
    assert "unknown system 'slim'; did you mean 'slime'?" in typo.stderr  # as before


GRID_SYSTEMS = ("from harness.studies.regress import DEFAULT_DIR, load_grid; "
                "print(sorted({c.system for c in load_grid(DEFAULT_DIR / 'grid.toml')}))")


def python(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python ARGS` in the checkout with the plugin folder on PYTHONPATH, opted in
    only as `env` says (ROLLOUTBENCH_CHECK_PLUGINS is dropped from ours)."""
    path = f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    base = {k: v for k, v in os.environ.items() if k != "ROLLOUTBENCH_CHECK_PLUGINS"}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          env={**base, "PYTHONPATH": path, **env},
                          cwd=Path(__file__).parents[1], timeout=300)


def test_the_project_checks_leave_an_installed_plugin_out_unless_it_opts_in(
        tmp_path: Path) -> None:
    """An installed plugin made `make test` fail (regress: cells added without a
    baseline; no golden trace): the project's checks cover its own systems."""
    site = tmp_path / "site"
    install(site, {"mine": "my_plugin:Mine"})
    plain = python(site, "-c", GRID_SYSTEMS)
    assert plain.returncode == 0, plain.stderr
    assert "'mine'" not in plain.stdout and "'slime'" in plain.stdout
    golden = python(site, "-m", "pytest", "--collect-only", "-q", "tests/test_golden.py")
    assert golden.returncode == 0, golden.stdout + golden.stderr
    assert "[slime]" in golden.stdout and "[mine]" not in golden.stdout
    # opted in, both cover it; a name that is not installed is named, not ignored
    opted = python(site, "-c", GRID_SYSTEMS, ROLLOUTBENCH_CHECK_PLUGINS="mine,nosuch")
    assert opted.returncode == 0, opted.stderr
    assert "'mine'" in opted.stdout and "'slime'" in opted.stdout
    assert "ROLLOUTBENCH_CHECK_PLUGINS: nosuch" in opted.stderr
    every = python(site, "-c", "import systems; print(systems.checked_names()[-1])",
                   ROLLOUTBENCH_CHECK_PLUGINS="all")
    assert every.stdout.strip() == "mine", every.stderr
