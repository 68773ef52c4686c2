"""Result files written safely, with their provenance.

A result file is written to a temporary name and renamed, so a reader never
sees half a file; every result records its package version and git commit."""

from __future__ import annotations

import json
import math
import os
import subprocess
import tempfile
import tomllib
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


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A TOML file as a table; ConfigError naming the file when it cannot be read."""
    from harness.core.fields import ConfigError

    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as err:
        raise ConfigError(f"{path}: {err.strerror}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a result is for sharing
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
