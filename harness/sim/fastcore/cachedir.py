"""Where the compiled core's numba cache goes: a folder named by the core's code.

Why not numba's own placement (`__pycache__` beside each module): numba checks a cached
function against its own file only (modification time and size), so after an edit of
stepmodel.py the functions of timeline.py that inline its step model load from the cache
as they were compiled, with the old formula (a two-file toy shows it: the caller keeps
returning the old value). Here every function of the package is cached in
`numba-<hash of all the package's .py files>`: any edit of the core starts a fresh folder.

Where: under `$NUMBA_CACHE_DIR` when set, else the package's `__pycache__` (what `make
setup` warms, harness/sim/fastcore/warm.py), else the user's cache folder
(`$XDG_CACHE_HOME` or ~/.cache, /rolloutbench). numba alone, with neither writable (a
read-only install, no home), refuses to import the module ("cannot cache function ...:
no locator available"); here a private temporary folder takes the cache (each process
compiles again, about 10 CPU s, but runs), and with no writable folder at all the
functions are compiled uncached. Never a shared, predictable /tmp path: a cache holds
code that is loaded and run. No numba here: the choice is made (and tested) without it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
PREFIX = "numba-"


def code_hash(folder: Path = HERE) -> str:
    """16 hex digits of sha256 over the package's .py files (names and bytes, sorted)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def writable(folder: Path) -> bool:
    """Whether `folder` exists or can be made, and takes a file (numba's own test)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def bases() -> list[Path]:
    """The folders a cache may go under, in order of preference."""
    given = os.environ.get("NUMBA_CACHE_DIR")
    user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rolloutbench"
    return [*([Path(given)] if given else []), HERE / "__pycache__", user]


def choose(candidates: list[Path], name: str) -> Path | None:
    """The first `candidate/name` that is writable, else a fresh private temporary
    folder, else None (no cache)."""
    for base in candidates:
        if writable(base / name):
            return base / name
    try:
        return Path(tempfile.mkdtemp(prefix=f"rolloutbench-{name}-"))
    except OSError:
        return None


def prune(cache: Path) -> list[Path]:
    """Remove the caches of earlier versions of the core beside `cache` (each edit of the
    package leaves one behind); returns what was removed."""
    gone = [p for p in cache.parent.glob(PREFIX + "*")
            if p.is_dir() and p != cache and len(p.name) == len(cache.name)]
    for path in gone:
        shutil.rmtree(path, ignore_errors=True)
    return gone
