"""Recording reproductions in a results folder: the claims tables and provenance.json.

Why its own module: a reproduction of one paper must update that paper's rows and
keep every other paper's (the folder is shared by four reproductions and is
committed), and provenance.json must stay true of what is on disk after any mix
of partial runs. Reading back, merging and writing live here, apart from running
the reproductions, so either can change (e.g. run the papers in parallel)
without the other.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness import __version__
from harness.core.files import dump_json, git_state, write_atomic
from harness.studies.claims import (
    Claim,
    ClaimsFileError,
    WouldNeed,
    as_written,
    from_csv,
    merge,
    to_csv,
)
from harness.studies.claims_md import summary_markdown, to_markdown

CLAIMS_FILES = ("claims.csv", "claims.md", "claims_summary.md", "provenance.json")
WOULD_NEED = "would_need.csv"


def load_claims(out: Path) -> list[Claim]:
    """The claims already recorded in OUT/claims.csv (none when there is no file);
    a file that is not a claims table is refused with its name and line."""
    path = out / "claims.csv"
    if not path.exists():
        return []
    if not path.is_file():
        raise ClaimsFileError(f"{path}: is not a file")
    return from_csv(path.read_text(), str(path))


def load_provenance(out: Path) -> dict[str, Any]:
    """OUT/provenance.json, or an empty record when there is none (or an old one
    without per-paper entries: those papers are then simply not listed)."""
    path = out / "provenance.json"
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ClaimsFileError(f"{path}: not valid JSON ({err.msg}, line {err.lineno})") from None
    return data if isinstance(data, dict) else {}


def write_claims(out: Path, old: list[Claim], new: list[Claim], names: Iterable[str],
                 order: Iterable[str], would_need: WouldNeed | None,
                 reading: Mapping[str, tuple[str, str]]) -> list[Claim]:
    """Write claims.csv, claims.md and claims_summary.md: `old` with the rows of the
    papers in `names` replaced by `new`. The Markdown is rendered from the rows as
    the CSV records them, so it reads the same whichever papers were rerun.
    Returns the merged rows."""
    merged = merge(old, as_written(new), names, order)
    write_atomic(out / "claims.csv", to_csv(merged, would_need))
    write_atomic(out / "claims.md", to_markdown(merged, would_need, reading))
    write_atomic(out / "claims_summary.md", summary_markdown(merged))
    return merged


def paper_record(command: str, calibration: dict[str, Any], results: Iterable[str],
                 figures: Path, figure_names: Iterable[str]) -> dict[str, Any]:
    """What one paper's reproduction was made from and what it wrote."""
    commit, dirty = git_state()
    return {"command": command, "version": __version__, "commit": commit, "dirty": dirty,
            "calibration": calibration, "results": list(results),
            "figures": [str(figures / f) for f in figure_names]}


def _exists(out: Path, entry: dict[str, Any]) -> dict[str, Any]:
    """A paper's record listing only the files that are on disk now."""
    return {**entry, "results": [f for f in entry.get("results", []) if (out / f).is_file()],
            "figures": [f for f in entry.get("figures", []) if Path(f).is_file()]}


def write_provenance(out: Path, old: dict[str, Any], new: Mapping[str, dict[str, Any]],
                     order: Iterable[str]) -> dict[str, Any]:
    """provenance.json: the record of every paper whose rows the claims table holds
    (the papers just run replace their old records), each listing only files that
    exist; at the top, the commit of this write and whether its code was dirty."""
    papers = {**old.get("papers", {}), **new}
    ranked = [p for p in dict.fromkeys([*order, *papers]) if p in papers]
    commit, dirty = git_state()
    files = [f for f in CLAIMS_FILES if f == "provenance.json" or (out / f).is_file()]
    if (out / WOULD_NEED).is_file():
        files.append(WOULD_NEED)
    meta = {
        "version": __version__, "commit": commit, "dirty": dirty,
        "updated": list(new),
        "papers": {p: _exists(out, papers[p]) for p in ranked},
    }
    meta["files"] = sorted({*files, *(f for p in meta["papers"].values()
                                      for f in p["results"])})
    write_atomic(out / "provenance.json", dump_json(meta))
    return meta
