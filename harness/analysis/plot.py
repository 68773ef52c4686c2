"""A metric against a swept field, one line per system, from a results table.

Why: a sweep (or a reproduction) leaves one row per cell and round; the
question is usually "how does METRIC move with FIELD, per system". seaborn's
lineplot averages the rows at each x (rounds and repeated seeds) and draws the
95% confidence interval of that mean, so repeats show as a band, not noise.
"""

from __future__ import annotations

import os
from typing import Any

from harness.analysis import InputError
from harness.analysis.labels import label, short
from harness.analysis.tables import read_table, require_columns


def parse_where(items: list[str]) -> list[tuple[str, str]]:
    """FIELD=VALUE filters."""
    out = []
    for item in items:
        field, sep, value = item.partition("=")
        if not sep or not field:
            raise InputError(f"--where: expected FIELD=VALUE, got {item!r}")
        out.append((field, value))
    return out


def _filter(frame: Any, path: str | os.PathLike[str], where: list[tuple[str, str]]) -> Any:
    for field, value in where:
        require_columns(frame, path, {"--where": field})
        frame = frame[frame[field].astype(str) == value]
    if frame.empty:
        raise InputError(f"--where: no rows of {path} match "
                         f"{' and '.join(f'{f}={v}' for f, v in where)}")
    return frame


NOT_A_SETTING = {"cell", "seed", "round", "error", "trace", "incomplete", "phase", "study"}


def pooled(frame: Any, x: str, hue: str | None) -> list[str]:
    """The settings a line silently averages over: columns other than the metrics, x,
    the hue and the repeats (seeds, rounds) that take several values at one point of
    one line (cgp-fgd at F_w = 2 and 16 drawn as one line with a wide band)."""
    from harness.core.metrics import KEYS, OFFPOLICY_KEYS, TIME_KEYS
    from harness.core.yardstick import KEYS as DELIVERED
    from harness.core.yardstick import WINDOW_KEYS

    # the run's own figures (what it delivered, over which window) are results that differ
    # from run to run, not settings: the README's sweep warned of eight of them
    skip = {*KEYS, *OFFPOLICY_KEYS, *TIME_KEYS, *DELIVERED, *WINDOW_KEYS, "no_window",
            *NOT_A_SETTING, x, hue}
    keys = [x] + ([hue] if hue else [])
    out = []
    for col in (c for c in frame.columns if c not in skip):
        spread = frame.groupby(keys, dropna=False)[col].nunique(dropna=False)
        if (spread > 1).any():
            values = sorted(map(str, frame[col].dropna().unique()))[:4]
            out.append(f"each line averages over {col} ({', '.join(values)}): "
                       f"--where {col}=VALUE or --hue {col} separates them")
    return out


def plot_figure(path: str | os.PathLike[str], x: str, y: str, hue: str | None = None,
                where: list[tuple[str, str]] | None = None,
                warn: Any = None) -> Any:
    """The figure of `y` over `x` from the table at `path`, coloured by `hue`
    (by default `system` when the table has it: one line per system); `warn` gets a
    line for each setting a line would average over unseen."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd
    import seaborn as sns

    frame = read_table(path)
    if hue is None and "system" in frame.columns:
        hue = "system"
    require_columns(frame, path, {"--x": x, "--y": y, "--hue": hue})
    frame = _filter(frame, path, where or [])
    values = pd.to_numeric(frame[y], errors="coerce")
    if values.notna().sum() == 0:
        raise InputError(f"--y: column {y!r} of {path} has no numeric values")
    frame = frame.assign(**{y: values})
    for line in pooled(frame, x, hue) if warn is not None else []:
        warn(line)
    if hue is not None:  # categorical colours even for a numeric hue (e.g. groups)
        frame = frame.assign(**{hue: frame[hue].astype(str)})
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    sns.lineplot(data=frame, x=x, y=y, hue=hue, style=hue, markers=True, dashes=False,
                 errorbar=("ci", 95), ax=ax)
    ax.set_xlabel(label(x))
    ax.set_ylabel(label(y))
    ax.grid(True, alpha=0.3)
    if hue is not None:  # beside the axes: a legend inside may cover a line
        ax.legend(title=short(hue), fontsize=8, frameon=False, loc="upper left",
                  bbox_to_anchor=(1.01, 1))
    ax.set_title(title(path, x, y, hue, where or []), fontsize=10)
    return fig


def title(path: str | os.PathLike[str], x: str, y: str, hue: str | None,
          where: list[tuple[str, str]]) -> str:
    """What the figure shows, from which file, and what the band is."""
    from pathlib import Path

    head = f"{short(y)} against {short(x)}" + (f", by {short(hue)}" if hue else "")
    kept = f" where {', '.join(f'{f}={v}' for f, v in where)}" if where else ""
    return (f"{head[0].upper()}{head[1:]}\n{Path(path).name}{kept}; line: mean, band: 95% "
            "CI of the mean over rows (rounds, seeds)")
