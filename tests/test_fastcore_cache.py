"""The compiled core's numba cache: named by the core's code, in a folder that can be
written, warmed by `make setup` (`python -m harness.sim.fastcore.warm`).

Nothing here imports numba into this process (harness/sim/fastcore/cachedir.py has none;
the warm-up and the read-only case run in fresh processes), so these tests need no place
at the end of the session (tests/conftest.py).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from harness.sim.fastcore import cachedir
from harness.sim.fastcore.cachedir import bases, choose, code_hash, prune, writable

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def test_the_hash_moves_with_any_module_of_the_core(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "b.py").write_text("y = 2\n")
    first = code_hash(tmp_path)
    assert re.fullmatch(r"[0-9a-f]{16}", first)
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "c.py").write_text("not code\n")
    (tmp_path / "notes.txt").write_text("not code\n")
    assert code_hash(tmp_path) == first  # neither a cache nor a non-Python file counts
    (tmp_path / "a.py").write_text("x = 2\n")  # a callee's edit: its callers' cache goes
    second = code_hash(tmp_path)
    assert second != first
    (tmp_path / "c.py").write_text("")  # a new module, even empty
    assert code_hash(tmp_path) not in (first, second)
    (tmp_path / "c.py").unlink()
    (tmp_path / "a.py").write_text("x = 1\n")
    assert code_hash(tmp_path) == first  # the same code, the same folder


def test_the_first_writable_base_takes_the_cache(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")  # nothing can be made under a file
    assert not writable(blocked / "sub")
    assert choose([blocked, tmp_path / "ok", tmp_path / "later"], "numba-x") == (
        tmp_path / "ok" / "numba-x")
    assert (tmp_path / "ok" / "numba-x").is_dir() and not (tmp_path / "later").exists()


def test_nothing_writable_gives_a_private_temporary_folder_or_no_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    one, two = choose([blocked], "numba-x"), choose([blocked], "numba-x")
    assert one is not None and two is not None and one != two  # never a predictable path
    assert one.parent == tmp_path and one.name.startswith("rolloutbench-numba-x-")
    assert stat.S_IMODE(one.stat().st_mode) == 0o700
    monkeypatch.setattr(tempfile, "tempdir", str(blocked))  # no temporary folder either
    assert choose([blocked], "numba-x") is None


def test_the_bases_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    here = Path(cachedir.__file__).parent / "__pycache__"
    monkeypatch.setenv("NUMBA_CACHE_DIR", "/given")
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert bases() == [Path("/given"), here, Path("/xdg/rolloutbench")]
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", "/home/someone")
    assert bases() == [here, Path("/home/someone/.cache/rolloutbench")]


def test_prune_removes_only_earlier_versions_of_the_core(tmp_path: Path) -> None:
    keep = tmp_path / "numba-0123456789abcdef"
    old = tmp_path / "numba-fedcba9876543210"
    other = [tmp_path / "numba-short", tmp_path / "something-else-entirely"]
    for folder in (keep, old, *other):
        folder.mkdir()
    assert prune(keep) == [old]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in (keep, *other))


def warm(env: dict[str, str]) -> tuple[int, int, str]:
    """Run the warm-up in a fresh process: (functions compiled, loaded, the cache)."""
    done = subprocess.run([sys.executable, "-m", "harness.sim.fastcore.warm"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
    assert (done.returncode, done.stderr) == (0, "")  # quiet: one line on stdout
    line, = done.stdout.splitlines()
    found = re.fullmatch(r"compiled core: ready in [0-9.]+ CPU s, (\d+) functions compiled, "
                         r"(\d+) loaded \(numba cache: (.+)\)", line)
    assert found, line
    return int(found[1]), int(found[2]), found[3]


@pytest.mark.slow
def test_the_warm_up_compiles_every_function_once(tmp_path: Path) -> None:
    env = {**ENV, "NUMBA_CACHE_DIR": str(tmp_path)}
    (tmp_path / "numba-0000000000000000").mkdir()  # an earlier version's cache
    compiled, loaded, cache = warm(env)
    # every function of the core is compiled (the warm-up exits 1 naming any it missed)
    assert compiled > 0 and loaded == 0
    assert Path(cache) == tmp_path / f"numba-{code_hash()}"
    assert [p.name for p in tmp_path.iterdir()] == [Path(cache).name]  # the old one gone
    compiled, loaded, again = warm(env)  # a second process: all from the cache
    assert (compiled, again) == (0, cache) and loaded > 0


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0
                    or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to run as another user")
def test_a_read_only_checkout_without_a_home_still_imports_quietly() -> None:
    """numba alone raises 'cannot cache function ...: no locator available' as the module
    is imported; here the cache goes to a private temporary folder."""
    core = Path(cachedir.__file__).parent
    if os.stat(core).st_mode & stat.S_IWOTH or os.stat(ROOT).st_mode & stat.S_IWOTH:
        pytest.skip("the checkout is writable by everyone")
    if not all(os.stat(p).st_mode & stat.S_IXOTH for p in (ROOT, *ROOT.parents)):
        pytest.skip("user nobody cannot reach the checkout (a folder above it is private)")
    tmp = Path(tempfile.mkdtemp())  # pytest's own is the owner's alone
    tmp.chmod(0o777)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent",
           "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)}
    script = ("import harness.sim.fastcore.timeline, harness.sim.fastcore.stepped; "
              "from harness.sim.fastcore.jit import CACHE; print(CACHE)")
    try:
        done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                               sys.executable, "-c", script], cwd=tmp, env=env,
                              capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(tmp)
    assert (done.returncode, done.stderr) == (0, "")
    cache = Path(done.stdout.strip())
    assert cache.parent == tmp and cache.name.startswith(f"rolloutbench-numba-{code_hash()}-")


def test_a_cold_cache_is_said_once_before_the_compile(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """The first run of a checkout `make setup` did not warm compiled for 16-21 s behind a
    blank terminal (a new user's trial): a note says so, only while nothing is cached."""
    from harness.core import notes
    from harness.sim.fastcore import jit

    monkeypatch.setattr(notes, "_said", set())
    monkeypatch.setattr(jit, "CACHE", tmp_path)
    jit.say_if_cold.cache_clear()  # looked at once a process: each case its own look
    jit.say_if_cold()
    jit.say_if_cold()
    said = capsys.readouterr().err
    assert said.count("note: compiling the simulator's engine core") == 1, said
    monkeypatch.setattr(notes, "_said", set())
    index = tmp_path / "fastcore_6d7c" / "timeline.run_engines-1.py311.nbi"  # as numba puts it
    index.parent.mkdir()
    index.write_bytes(b"")
    jit.say_if_cold.cache_clear()
    jit.say_if_cold()
    assert capsys.readouterr().err == ""
