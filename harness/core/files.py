"""Result files written safely, with their provenance.

A result file is written to a temporary name and renamed, so a reader never
sees half a file; every result records its package version and git commit."""

from __future__ import annotations

import errno
import json
import math
import os
import subprocess
import tempfile
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from harness import __version__


def _git(*args: str) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=Path(__file__).parent, capture_output=True,
                             text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def git_state() -> tuple[str, bool]:
    """The commit of the checkout the package runs from ('unknown' outside a git
    checkout) and whether the code that makes results (harness, systems, workloads)
    has uncommitted changes: a result made from a dirty tree is not that commit's."""
    commit = _git("rev-parse", "HEAD")
    if not commit:
        return "unknown", False
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", ":/harness",
                 ":/systems", ":/workloads")
    return commit, bool(dirty)


def git_commit() -> str:
    """The commit as one string, with '-dirty' when the code has uncommitted changes."""
    commit, dirty = git_state()
    return f"{commit}-dirty" if dirty else commit


def provenance(**extra: Any) -> dict[str, Any]:
    return {"version": __version__, "commit": git_commit(), **extra}


def not_utf8(err: UnicodeDecodeError) -> str:
    """Why a file meant as text is not: where a TOML, JSON or CSV file was asked for, a
    compressed trace given by mistake, or a UTF-16 file (what PowerShell's `>` writes)."""
    return f"not UTF-8 text (byte {err.object[err.start]:#04x} at offset {err.start})"


def parse_toml(raw: bytes) -> dict[str, Any]:
    """A TOML file's bytes as a table; bytes that are not UTF-8 text are a TOMLDecodeError
    too (tomllib raised UnicodeDecodeError, which no reader of a TOML file caught: a
    traceback), so every reader's own handling of a bad file says them in its one line."""
    try:
        text = raw.decode()
    except UnicodeDecodeError as err:
        raise tomllib.TOMLDecodeError(not_utf8(err)) from None
    return tomllib.loads(text)


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A TOML file as a table; ConfigError naming the file when it cannot be read."""
    from harness.core.fields import ConfigError

    try:
        return parse_toml(Path(path).read_bytes())
    except OSError as err:
        raise ConfigError(f"{path}: {err.strerror}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None


def discard(path: str | os.PathLike[str]) -> None:
    """Remove a partly written file, if there is one, and say nothing if that fails: a
    clean-up after a failed write must not raise over the error that caused it (on a
    read-only file system `unlink` of a missing file fails with EROFS, not ENOENT, and a
    user got a traceback instead of the one line saying the folder is not writable)."""
    try:
        Path(path).unlink(missing_ok=True)
    except OSError:
        pass


def make_parent(path: Path) -> None:
    """`path`'s folder, made where missing. A file where that folder is due is
    NotADirectory naming it: `mkdir(exist_ok=True)` says "File exists" of it, which read
    as the output itself being there (`check --json runs/afile/x.json`, runs/afile a
    file); a file further up mkdir already reports as NotADirectory."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR),
                                 str(path.parent)) from None


def write_atomic(path: str | os.PathLike[str], text: str | bytes) -> None:
    path = Path(path)
    make_parent(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a result is for sharing
        os.replace(tmp, path)
    except BaseException:
        discard(tmp)
        raise


def read_cached(path: str | os.PathLike[str], key: Any) -> Any:
    """The value `write_cached` kept at `path` under `key` (a version: a figure's
    definition changed, the value is stale), else None."""
    try:
        kept = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return kept.get("value") if isinstance(kept, dict) and kept.get("key") == key else None


def write_cached(path: str | os.PathLike[str], key: Any, value: Any) -> None:
    """Keep `value` at `path` (JSON) under `key`, for `read_cached`."""
    write_atomic(path, json.dumps({"key": key, "value": value}) + "\n")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _clean(value: Any) -> Any:
    """NaN is not JSON: write null instead."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def dump_json(obj: Any) -> str:
    if isinstance(obj, list):
        obj = [{k: _clean(v) for k, v in row.items()} if isinstance(row, dict) else row
               for row in obj]
    return json.dumps(obj, indent=2) + "\n"


def overwrites(option: str, out: str | os.PathLike[str] | None,
               reads: Iterable[tuple[str, str | os.PathLike[str] | None]],
               names: Sequence[str] | None = None) -> str | None:
    """Why writing `out` would overwrite an input (one line naming both), or None.

    `out` is the file written (the option's value, `option`); with `names`, the folder
    they are written in: a name ending in '/' is a folder the command fills (everything
    under it), '' the whole folder. `reads` pairs how the user gave each input with its
    path (None: not given); an input folder is overwritten by a written file that
    already exists in it. Paths are compared as the files they reach (links resolved,
    hard links too)."""
    if out is None:
        return None
    base = Path(out)
    targets = [(base, False)] if names is None else \
        [(base / name.rstrip("/"), name == "" or name.endswith("/")) for name in names]
    for label, read in reads:
        if read is None:
            continue
        path = Path(os.path.realpath(read))
        for target, folder in targets:
            where = Path(os.path.realpath(target))
            if (path == where or (folder and where in path.parents) or _same_file(path, where)
                    or (path.is_dir() and path in where.parents and where.is_file())):
                return (f"{option} {out}: would overwrite {label} {read}, which this command "
                        f"reads; write elsewhere")
    return None


def _same_file(a: Path, b: Path) -> bool:
    """Two names of one file (a hard link); False when either is missing."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
