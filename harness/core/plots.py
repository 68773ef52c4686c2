"""Shared figure plumbing: a headless backend and an atomic save."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import matplotlib

from harness.core.files import discard, make_parent

matplotlib.use("Agg")


def save_figure(fig: Any, path: str | os.PathLike[str]) -> None:
    """Write to a temporary name, then rename, so a reader never sees half a figure;
    no software metadata, so a re-run writes the same bytes."""
    import matplotlib.pyplot as plt

    path = Path(path)
    make_parent(path)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    try:
        fig.savefig(tmp, dpi=130, bbox_inches="tight", metadata={"Software": None})
        tmp.replace(path)
    finally:
        plt.close(fig)
        discard(tmp)
