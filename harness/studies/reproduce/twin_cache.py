"""The claims' roofline twin, kept beside the claims and re-run only when its inputs change.

The twin is every paper's claims again with every run on the roofline step model: one
column of the claims table (`harness_roofline`), and until #36 a whole second pass, about
half of `make reproduce`. Its values are a pure function of the code that simulates and
reproduces (the simulated runtime, the systems, the workloads, the reproductions, the
calibrations and presets) and of the arguments (rounds, seed): so they are kept in
OUT/roofline_twin.csv under a fingerprint of those files' bytes and the arguments, and a
reproduction whose fingerprint matches takes its twin from there instead of simulating it
again. Any change to one of those files, or another Python (minor version) or numpy,
misses the cache and runs the twin as before (`--twin run` forces that; `--twin skip`
leaves the column empty).

The fingerprint hashes file contents by their paths relative to the repository, so a
fresh clone of the same commit hits the cache that commit wrote.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import sys
from collections.abc import Iterable
from functools import cache
from importlib import metadata
from pathlib import Path

import numpy as np

from harness.core.files import write_atomic

FILE = "roofline_twin.csv"
COLUMNS = ("paper", "claim", "config", "reading", "harness_roofline")
ROOT = Path(__file__).resolve().parents[3]  # the repository: harness/studies/reproduce/..
# What a twin's numbers depend on: every file below these folders, by content.
INPUTS = ("harness/sim", "systems", "harness/core", "harness/shared", "harness/run",
          "harness/analysis", "harness/studies/reproduce", "harness/studies/analytic",
          "harness/studies/claims.py", "workloads")
SUFFIXES = (".py", ".toml", ".json", ".jsonl", ".csv", ".parquet", ".yaml")
MODES = ("auto", "run", "skip")
KERNEL_DISTRIBUTIONS = ("aiconfigurator-core", "aiconfigurator")

Key = tuple[str, str, str, str]  # paper, claim, config, reading


def input_files(root: Path = ROOT) -> list[Path]:
    """The files a twin's numbers depend on, sorted by relative path."""
    out: list[Path] = []
    for name in INPUTS:
        path = root / name
        if path.is_file():
            out.append(path)
        elif path.is_dir():
            out += [p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES
                    and "__pycache__" not in p.parts]
    return sorted(out, key=lambda p: p.relative_to(root).as_posix())


@cache
def inputs_digest(root: Path = ROOT) -> str:
    """sha256 of the inputs' relative paths and bytes, and of the versions of Python (its
    minor version: Debian's 3.11.2, which `make setup` prefers, and pyenv's 3.11.7 made the
    same twin to the byte, so a clone set up with either takes the other's), numpy and the
    kernel database (the kernel trainer reads its tables on any step model)."""
    digest = hashlib.sha256()
    major, minor = sys.version_info[:2]
    versions = [f"python {major}.{minor}", np.__version__]
    for dist in KERNEL_DISTRIBUTIONS:
        try:
            versions.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{dist} absent")
    digest.update("|".join(versions).encode() + b"\n")
    for path in input_files(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def fingerprint(paper: str, rounds: int, seed: int, root: Path = ROOT) -> str:
    """The inputs' digest and the arguments: equal fingerprints give equal twins."""
    return hashlib.sha256(f"{paper}|{rounds}|{seed}|{inputs_digest(root)}".encode()
                          ).hexdigest()


def load(out: Path) -> dict[str, tuple[str, dict[Key, float]]]:
    """paper -> (fingerprint, values by key) from OUT/roofline_twin.csv ({} when absent).
    Each paper's rows follow a `# paper fingerprint` line."""
    path = out / FILE
    if not path.exists():
        return {}
    try:
        return _parse(path.read_text())
    except (KeyError, ValueError, csv.Error):  # a damaged cache: simulated again, rewritten
        return {}


def _parse(text: str) -> dict[str, tuple[str, dict[Key, float]]]:
    kept: dict[str, tuple[str, dict[Key, float]]] = {}
    prints: dict[str, str] = {}
    lines = text.splitlines()
    for line in lines:
        if line.startswith("# "):
            paper, _, value = line[2:].partition(" ")
            prints[paper] = value
    rows = csv.DictReader(line for line in lines if not line.startswith("# "))
    for r in rows:
        values = kept.setdefault(r["paper"], (prints.get(r["paper"], ""), {}))[1]
        values[(r["paper"], r["claim"], r["config"], r["reading"])] = _number(
            r["harness_roofline"])
    for paper, value in prints.items():  # a paper whose twin has no rows at all
        kept.setdefault(paper, (value, {}))
    return kept


def _text(value: float) -> str:
    """A value as it reads back exactly and of the same kind: an integer stays one (a
    claims table writes 123, not 123.0), numpy's numbers as Python's (no "np.float64(")."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return str(int(value))
    return repr(float(value))


def _number(text: str) -> float:
    """`_text` read back: an integer where it was written as one."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def cached(out: Path, paper: str, rounds: int, seed: int) -> dict[Key, float] | None:
    """This paper's kept twin when its fingerprint matches today's, else None."""
    entry = load(out).get(paper)
    if entry is None or entry[0] != fingerprint(paper, rounds, seed):
        return None
    return entry[1]


def save(out: Path, twins: dict[str, Iterable[tuple[Key, float]]], rounds: int,
         seed: int) -> None:
    """Replace the named papers' twins in OUT/roofline_twin.csv, keeping the others."""
    kept = load(out)
    for paper, rows in twins.items():
        kept[paper] = (fingerprint(paper, rounds, seed),
                       {k: v for k, v in rows if not math.isnan(v)})
    buf = io.StringIO()
    for paper in sorted(kept):
        buf.write(f"# {paper} {kept[paper][0]}\n")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for paper in sorted(kept):
        for key in sorted(kept[paper][1]):
            writer.writerow([*key, _text(kept[paper][1][key])])
    write_atomic(out / FILE, buf.getvalue())
