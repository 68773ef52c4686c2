"""An output folder that already holds results is not overwritten silently.

`run` (and the live `validate` and `live-demo`) refuse an `--out` that holds what
they would write, unless `--force` is given. Sweeps and what-if studies are not
guarded: rerunning one into its own folder resumes it (finished cells are kept,
keyed by their config), which is the point; `reproduce` updates its results tables
in place by design.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.core.config import ConfigError

RUN_FILES = ("trace.jsonl", "metrics.json")


def refuse_existing_run(out: Path, force: bool, files: Sequence[str] = RUN_FILES,
                        what: str = "a run") -> None:
    """ConfigError naming `--out` when OUT holds one of `files` and `force` is not set."""
    if force:
        return
    found = [name for name in files if (Path(out) / name).exists()]
    if found:
        raise ConfigError(f"--out {out}: holds {what} already ({found[0]}); give --force to "
                          "overwrite it, or another --out")
