"""Two source trees side by side for `make bench`: this one and a base commit's.

The base commit is checked out with `git worktree add` into a temporary folder
and removed again afterwards; code runs in a tree through a child Python with
the tree first on PYTHONPATH (and a check that it really imported from there).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class BenchError(RuntimeError):
    """The base tree could not be set up or a child failed (the message says how)."""


@dataclass
class Tree:
    root: Path
    label: str

    def python(self, code: str, *args: str, cwd: Path | None = None) -> Any:
        """Run `code` in a child Python on this tree; returns its last line's JSON."""
        check = ("import harness, sys; from pathlib import Path; "
                 f"assert Path(harness.__file__).resolve().is_relative_to({str(self.root)!r}),"
                 " harness.__file__\n")
        env = {**os.environ, "PYTHONPATH": str(self.root)}
        with tempfile.TemporaryDirectory() as tmp:
            proc = subprocess.run([sys.executable, "-c", check + code, *args],
                                  cwd=cwd or tmp, env=env, capture_output=True, text=True,
                                  check=False)
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
            raise BenchError(f"{self.label}: a benchmark child failed:\n{tail}")
        return json.loads(proc.stdout.strip().splitlines()[-1])


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
    print(f"base: {subject[:90]}")
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        path = Path(tmp) / "base"
        _git(root, "worktree", "add", "--detach", "--quiet", str(path), rev)
        try:
            yield Tree(path, f"base {rev[:9]}")
        finally:
            _git(root, "worktree", "remove", "--force", str(path))


def differing_files(a: Path, b: Path, skip: set[str]) -> list[str]:
    """Relative paths whose bytes differ (or exist on one side only)."""
    def listing(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
                if p.is_file() and p.name not in skip}

    left, right = listing(a), listing(b)
    return sorted(name for name in left.keys() | right.keys()
                  if left.get(name) != right.get(name))
