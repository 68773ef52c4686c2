"""Two source trees side by side for `make bench`: this one and a base commit's.

The base commit is checked out with `git worktree add` into a temporary folder
and removed again afterwards; code runs in a tree through a child Python with
the tree first on PYTHONPATH (and a check that it really imported from there).
What the child runs is always this tree's `probe.py`, so both trees are timed by
the same code.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class BenchError(RuntimeError):
    """The base tree could not be set up or a child failed (the message says how)."""


PROBE = Path(__file__).with_name("probe.py")


@dataclass
class Tree:
    root: Path
    label: str

    def probe(self, *args: str, cwd: Path | None = None, cpus: int = 0,
              env: dict[str, str] | None = None) -> Any:
        """Run `probe.py ARGS` in a child Python on this tree; returns its last line's
        JSON, with the child's whole wall seconds (start-up included) as "child_wall".
        `cpus`: pin the child to that many of this process's CPUs (0: all of them);
        `env`: variables set in the child's environment besides this one's."""
        check = ("import harness, runpy, sys; from pathlib import Path; "
                 f"assert Path(harness.__file__).resolve().is_relative_to({str(self.root)!r}),"
                 f" harness.__file__; "
                 f"runpy.run_path({str(PROBE)!r}, run_name='__main__')")
        env = {**os.environ, **(env or {}), "PYTHONPATH": str(self.root)}
        mask = sorted(allowed_cpus())[:cpus] if cpus else None
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "-c", check, *args], cwd=cwd or tmp,
                                  env=env, capture_output=True, text=True, check=False,
                                  preexec_fn=(lambda: os.sched_setaffinity(0, mask))
                                  if mask else None)
            wall = time.perf_counter() - start
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
            raise BenchError(f"{self.label}: probe {' '.join(args)} failed:\n{tail}")
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        if isinstance(out, dict):
            out["child_wall"] = wall
        return out


def allowed_cpus() -> set[int]:
    """The CPUs this process may run on."""
    try:
        return os.sched_getaffinity(0)
    except AttributeError:  # not on Linux
        return set(range(os.cpu_count() or 1))


def _git(root: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise BenchError(f"git {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def base_commit(root: Path) -> str:
    """BENCH_BASE, else the merge-base with main, else (this commit is on main) the
    first parent: the commit before the change."""
    rev = os.environ.get("BENCH_BASE")
    if rev:
        return _git(root, "rev-parse", "--verify", f"{rev}^{{commit}}")
    head = _git(root, "rev-parse", "HEAD")
    try:
        base = _git(root, "merge-base", "HEAD", "main")
    except BenchError:
        base = head
    return _git(root, "rev-parse", "HEAD^") if base == head else base


@contextlib.contextmanager
def base_worktree(root: Path) -> Iterator[Tree]:
    """The base commit checked out in a temporary worktree, removed afterwards."""
    rev = base_commit(root)
    subject = _git(root, "log", "-1", "--format=%h %s", rev)
    print(f"base: {subject[:90]}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        path = Path(tmp) / "base"
        _git(root, "worktree", "add", "--detach", "--quiet", str(path), rev)
        try:
            warm(path)
            yield Tree(path, f"base {rev[:9]}")
        finally:
            _git(root, "worktree", "remove", "--force", str(path))


def warm(root: Path) -> None:
    """Compile a tree's engine core into its own cache before anything is timed, as `make
    setup` does for this tree: a fresh worktree's cache is empty, and a probe's warm-up
    run does not reach every compiled function (the base's first verl-async repeat took
    2-2.5x as long, compiling inside the timed region). A tree without the core (before
    fastcore) or its warm module has nothing to compile; one whose warm fails is said and
    timed as it is (its warm-up run then compiles what it reaches)."""
    if not (root / "harness" / "sim" / "fastcore" / "warm.py").exists():
        return
    print("bench: compiling the base tree's engine core (once, untimed)", file=sys.stderr)
    proc = subprocess.run([sys.executable, "-m", "harness.sim.fastcore.warm"], cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"bench: the base tree's warm failed ({last}); timed as it is", file=sys.stderr)


def differing_files(a: Path, b: Path, skip: set[str]) -> list[str]:
    """Relative paths whose bytes differ (or exist on one side only)."""
    def listing(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
                if p.is_file() and p.name not in skip}

    left, right = listing(a), listing(b)
    return sorted(name for name in left.keys() | right.keys()
                  if left.get(name) != right.get(name))
