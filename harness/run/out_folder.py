"""The output folder a command writes into: checked before any work (it can be made,
it is not a file, it is writable), refused when it holds a run already unless forced,
made, and taken back if the run never wrote to it.

Why apart from checks.py: these are about the user's file system, not the run's
configuration; every writing command asks them, config or none.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from harness.core.config import ConfigError


def check_out(path: Path, option: str = "--out") -> None:
    """An output folder that can be made (or is one): refused in one line when it is
    a file, lies under a file, or its nearest existing folder is not writable.
    Nothing is created (the command makes it when it writes)."""
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"{option} {path}: is a file; give a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise ConfigError(f"{option} {path}: the folder is not writable")
        return
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{option} {path}: cannot be made ({parent} is a file)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {path}: cannot be made ({parent} is not writable)")


RUN_FILES = ("trace.jsonl.zst", "trace.jsonl", "metrics.json")  # a trace in either form


def refuse_existing_run(out: Path, force: bool, files: Sequence[str] = RUN_FILES,
                        what: str = "a run") -> None:
    """ConfigError naming `--out` when OUT holds one of `files` and `force` is not set.

    `run`, `validate` and `live-demo` guard their folder this way. Sweeps and
    what-if studies do not: rerunning one into its own folder resumes it (finished
    cells are kept, keyed by their config), which is the point; `reproduce`
    updates its results tables in place by design."""
    if force:
        return
    found = [name for name in files if (Path(out) / name).exists()]
    if found:
        raise ConfigError(f"--out {out}: holds {what} already ({found[0]}); give --force to "
                          "overwrite it, or another --out")


def out_dir(path: Path, option: str = "--out") -> bool:
    """Make the output folder (and its parents); True when this call made it, so a
    run that then never starts can remove it again. One line if it cannot be."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {path}: is a file; give a folder")
    made = not path.exists()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"{option} {path}: cannot make the folder ({err.strerror})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {path}: the folder is not writable")
    return made


def remove_if_empty(path: Path) -> None:
    """Take back a folder a run made but never wrote to (nothing else is touched)."""
    with contextlib.suppress(OSError):  # only an empty folder goes
        path.rmdir()
