"""The issue's targets (#36), each measured in this tree and in the base, one row each.

- CPU microseconds per simulated request (process CPU inside the child, imports and a
  small warm-up run excluded, over the `request_submit` events its runs emitted) on
  RolloutPipe's grid and on verl-async's runs (`probe.VERL_LABELS`): the two trees
  alternate, the order flipped every repeat, and each repeat's two runs make one ratio.
- `rolloutbench reproduce all` as `make reproduce` runs it (REPRODUCE_OPTS from the
  Makefile, one job per core) on two cores, in a fresh folder holding a copy of the
  tree's committed results/ and figures/ (so the roofline twin is taken from
  results/roofline_twin.csv where its fingerprint matches, as on a fresh clone) and an
  empty kernel-table cache (a table not shipped is built, as on a fresh machine): its
  wall seconds, start-up included, and the bytes it wrote (every file it created or
  rewrote: runs/, results/, figures/). Once a tree: 4-6 minutes each at fdfe2fa.
- A run of about a million requests (`probe.million`): wall seconds of the run and the
  child's peak RSS, MILLION_REPEATS times a tree, the trees alternating as above: a
  single run a tree moved by 10% between two benches an hour apart on the same machine
  (21.9 / 20.7 s, the same tree), more than a session's changes.
"""

from __future__ import annotations

import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from harness.studies.bench.report import Row, Target
from harness.studies.bench.trees import Tree, differing_files

MB, GB = 1e6, 1e9
CORES = 2  # `make reproduce` on two cores (the target)
MILLION_ROUNDS = 128  # R 512 x K 16 = 8,192 requests a window: 1,048,576
MILLION_REPEATS = 2  # runs of it a tree


def say(line: str) -> None:
    """A progress line on stderr (stdout holds the results)."""
    print(f"bench: {line}", file=sys.stderr, flush=True)


def cpu_row(name: str, what: str, head: Tree, base: Tree, repeats: int,
            notes: list[str]) -> Row:
    """CPU us per request of probe `name`, the trees interleaved."""
    row = Row(f"{what} CPU/request", "us", Target("ratio", 8))
    requests: dict[str, set[int]] = {"base": set(), "head": set()}
    for i in range(repeats):
        pair: dict[str, float] = {}
        order = (("base", base), ("head", head)) if i % 2 == 0 else (("head", head),
                                                                        ("base", base))
        for side, tree in order:
            r = tree.probe(name)
            us = r["cpu"] / r["requests"] * 1e6
            pair[side] = us
            requests[side].add(int(r["requests"]))
            say(f"{what} {i + 1}/{repeats} {tree.label}: {us:.1f} us/request, "
                f"{r['wall']:.1f} s wall, {r['requests']:,} requests in {r['runs']} runs")
        row.base.append(pair["base"])
        row.head.append(pair["head"])
        row.ratios.append(pair["base"] / pair["head"])
    counts = {side: ", ".join(f"{n:,}" for n in sorted(s)) for side, s in requests.items()}
    same = "the same in both trees" if counts["base"] == counts["head"] else (
        f"base {counts['base']}, this tree {counts['head']}: the simulation changed")
    notes.append(f"{what}: {counts['head']} requests a repeat ({same}); {repeats} "
                 "repeats a tree, interleaved")
    return row


def reproduce_options(root: Path) -> list[str]:
    """REPRODUCE_OPTS of the tree's Makefile (relative --out and --figures: the run's
    folder), or the options it has had since they were set."""
    makefile = root / "Makefile"
    if makefile.exists():
        for line in makefile.read_text().splitlines():
            name, sep, value = line.partition(":=")
            if sep and name.strip() == "REPRODUCE_OPTS":
                return shlex.split(value)
    return ["--out", "results", "--figures", "figures", "--rounds", "4", "--seed", "0"]


def written_bytes(folder: Path, since: float) -> dict[str, int]:
    """Bytes of the files under `folder` modified at or after `since` (epoch seconds),
    by top-level folder."""
    out: dict[str, int] = {}
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            st = path.stat()
            if st.st_mtime >= since:
                top = path.relative_to(folder).parts[0]
                out[top] = out.get(top, 0) + st.st_size
    return out


def reproduce_once(tree: Tree, folder: Path, options: list[str]) -> dict[str, Any]:
    """`rolloutbench reproduce all OPTIONS` in `folder` (a copy of the tree's results/
    and figures/ put there first), on CORES cores, with an empty kernel-table cache as a
    fresh machine has (`ROLLOUTBENCH_CACHE`): a table the reproductions need and the
    tree does not ship is built, and counted (`tables`), as on a user's first run."""
    folder.mkdir(parents=True)
    for name in ("results", "figures"):
        if (tree.root / name).is_dir():
            shutil.copytree(tree.root / name, folder / name)
    cache = folder.parent / f"{folder.name}-cache"
    since = time.time()  # the copies keep their files' mtimes (copy2)
    say(f"reproduce all in {tree.label} on {CORES} cores (minutes)")
    r = tree.probe("cli", "reproduce", "all", *options, cwd=folder, cpus=CORES,
                   env={"ROLLOUTBENCH_CACHE": str(cache)})
    sizes = written_bytes(folder, since)
    tables = len(list((cache / "kernels").glob("*.json")))
    say(f"reproduce all in {tree.label}: {r['child_wall']:.1f} s wall, {r['cpu']:.1f} CPU s, "
        f"{sum(sizes.values()) / MB:,.1f} MB written, {tables} kernel tables built")
    return {"wall": r["child_wall"], "cpu": r["cpu"], "bytes": sum(sizes.values()),
            "by_folder": sizes, "tables": tables}


def reproduce_rows(head: Tree, base: Tree | None, tmp: Path, notes: list[str]
                   ) -> tuple[list[Row], Path]:
    """Wall seconds and bytes written of `make reproduce`'s command, once a tree; returns
    the rows and this tree's folder (the extras compare --jobs 1 with it)."""
    options = reproduce_options(head.root)
    wall = Row("reproduce wall", "s", Target("most", 30))
    disk = Row("reproduce disk", "MB", Target("most", 200))
    runs = {}
    for side, tree in (("base", base), ("head", head)):
        if tree is None:
            continue
        runs[side] = r = reproduce_once(tree, tmp / side, options)
        getattr(wall, side).append(r["wall"])
        getattr(disk, side).append(r["bytes"] / MB)
        parts = ", ".join(f"{k}/ {v / MB:,.1f}" for k, v in sorted(r["by_folder"].items()))
        notes.append(f"reproduce all {' '.join(options)} on {CORES} cores in {tree.label}: "
                     f"{r['cpu']:.1f} CPU s (its workers' included); MB written by "
                     f"folder: {parts or 'none'}; kernel tables built (not shipped): "
                     f"{r['tables']}")
    if base is not None:
        differ = [f"{name}/{d}" for name in ("results", "figures")
                  for d in differing_files(tmp / "base" / name, tmp / "head" / name,
                                           skip={"provenance.json"})]
        notes.append("reproduce's results and figures, this tree against the base: " + (
            "byte-identical" if not differ else f"differ in {len(differ)} files: "
            + ", ".join(differ[:5])))
    return [wall, disk], tmp / "head"


def million_rows(head: Tree, base: Tree | None, rounds: int, notes: list[str],
                 repeats: int = MILLION_REPEATS) -> list[Row]:
    """Wall seconds and peak RSS of `repeats` runs a tree of `rounds` sync windows (128:
    1M requests), the trees alternating (the order flipped every repeat)."""
    size = "1M-request" if rounds == MILLION_ROUNDS else f"{rounds * 8192:,}-request"
    wall = Row(f"{size} run wall", "s", Target("most", 20))
    rss = Row(f"{size} run peak RSS", "GB", Target("most", 1.5))
    sides = [(side, tree) for side, tree in (("base", base), ("head", head)) if tree]
    for i in range(repeats):
        for side, tree in sides if i % 2 == 0 else sides[::-1]:
            say(f"run {i + 1}/{repeats} of {rounds} windows in {tree.label} "
                "(minutes at 128)")
            r = tree.probe("million", str(rounds))
            getattr(wall, side).append(r["wall"])
            getattr(rss, side).append(r["rss"] / GB)
            say(f"{tree.label}: {r['wall']:.1f} s wall, {r['rss'] / GB:.2f} GB peak RSS")
            if i == 0:
                notes.append(f"{size} run in {tree.label}: verl-fully-async, "
                             f"{r['engines']} engines, {r['requests']:,} requests (R 512 x "
                             f"K 16 x {rounds}), {r['cpu']:.1f} CPU s, trace "
                             f"{r['trace_bytes'] / MB:,.0f} MB")
    if len(sides) == 2:  # paired, as the CPU rows
        wall.ratios = [b / h for b, h in zip(wall.base, wall.head, strict=True)]
        rss.ratios = [b / h for b, h in zip(rss.base, rss.head, strict=True)]
    return [wall, rss]
