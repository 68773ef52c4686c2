"""`make bench` (`python -m harness.studies.bench`): the simulator's targets of #36 as
this tree against a base commit, in one run.

Absolute times on a shared machine move by tens of percent from one minute to the
next, so every measure runs in both trees in the same run: the base commit is checked
out into a temporary git worktree (`trees`) and the same probe (`probe.py`, this
tree's file) runs in a child Python on each tree. Nothing in the working tree is
written except the table (--out). Every option's default can be set by the
environment variable named in --help (what `make bench` passes on).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from harness.studies.bench import measures, report
from harness.studies.bench.extras import extras
from harness.studies.bench.trees import BenchError, Tree, base_worktree

ROOT = Path(__file__).resolve().parents[3]
PARTS = ("grid", "verl", "million", "million-base", "reproduce", "reproduce-base")


class BadInput(ValueError):
    """A bad option or environment variable (one line, exit 2)."""


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise BadInput(f"{name}={raw!r}: not a whole number") from None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m harness.studies.bench", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--base", default=os.environ.get("BENCH_BASE", ""),
                   help="the commit to measure against (BENCH_BASE; empty: the merge-base "
                   "with main, or the first parent on main)")
    p.add_argument("--repeats", type=int, default=env_int("BENCH_REPEATS", 3),
                   help="repeats a tree of the CPU measures, interleaved (BENCH_REPEATS)")
    p.add_argument("--skip", default=os.environ.get("BENCH_SKIP", ""),
                   help="comma-separated parts to leave out (BENCH_SKIP): "
                   + ", ".join(PARTS) + " (an X-base: X in this tree only)")
    p.add_argument("--million-rounds", type=int,
                   default=env_int("BENCH_MILLION_ROUNDS", measures.MILLION_ROUNDS),
                   help="sync windows of the big run, 8,192 requests each "
                   "(BENCH_MILLION_ROUNDS)")
    p.add_argument("--million-repeats", type=int,
                   default=env_int("BENCH_MILLION_REPEATS", measures.MILLION_REPEATS),
                   help="runs of the big run a tree, interleaved (BENCH_MILLION_REPEATS)")
    p.add_argument("--out", type=Path, default=Path(os.environ.get(
        "BENCH_OUT", "runs/bench/bench.md")), help="the table as markdown, the CSV beside "
        "it with the suffix .csv (BENCH_OUT)")
    p.add_argument("--extras", action="store_true",
                   default=os.environ.get("BENCH_EXTRAS", "") not in ("", "0"),
                   help="also kernels against roofline, reproduce --jobs 1, R and K growth, "
                   "plan --budget timing (BENCH_EXTRAS=1; about 10 minutes more)")
    return p


def checked(args: argparse.Namespace) -> set[str]:
    """The parts skipped; bad values end the run before any work (`BadInput`)."""
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    unknown = sorted(skip - set(PARTS))
    if unknown:
        raise BadInput(f"--skip/BENCH_SKIP: unknown part {unknown[0]!r} "
                       f"(one of {', '.join(PARTS)})")
    if args.repeats < 1:
        raise BadInput(f"--repeats/BENCH_REPEATS: {args.repeats} (at least 1)")
    if args.million_repeats < 1:
        raise BadInput(f"--million-repeats/BENCH_MILLION_REPEATS: {args.million_repeats} "
                       "(at least 1)")
    if args.million_rounds < 1:
        raise BadInput(f"--million-rounds/BENCH_MILLION_ROUNDS: {args.million_rounds} "
                       "(at least 1)")
    if args.out.suffix != ".md":
        raise BadInput(f"--out/BENCH_OUT: {args.out} (a .md file; the CSV goes beside it)")
    return skip


def this_tree() -> str:
    """HEAD's short hash, and whether tracked files differ from it."""
    def git(*a: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True,
                              check=False).stdout.strip()
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return git("rev-parse", "--short=9", "HEAD") + (" + uncommitted changes" if dirty else "")


def bench(args: argparse.Namespace, skip: set[str]) -> tuple[list[report.Row], list[str]]:
    head = Tree(ROOT, "this tree")
    rows: list[report.Row] = []
    notes: list[str] = [f"this tree: {this_tree()}"]
    with base_worktree(ROOT) as base, tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        notes.append(f"base: {base.label.removeprefix('base ')}")
        for part, what in (("grid", "RolloutPipe"), ("verl", "verl-async")):
            if part not in skip:
                rows.append(measures.cpu_row(part, what, head, base, args.repeats, notes))
        if "million" not in skip:
            rows += measures.million_rows(head, None if "million-base" in skip else base,
                                          args.million_rounds, notes,
                                          args.million_repeats)
        per_core = None
        if "reproduce" not in skip:
            found, per_core = measures.reproduce_rows(
                head, None if "reproduce-base" in skip else base, Path(tmp), notes)
            rows += found
        if args.extras:
            notes += extras(head, args.repeats, per_core)
    return rows, notes


def main(argv: list[str] | None = None) -> int:
    start = time.perf_counter()
    try:
        args = parser().parse_args(argv)
        skip = checked(args)
        if args.base:
            os.environ["BENCH_BASE"] = args.base  # `trees.base_commit` reads it
        rows, notes = bench(args, skip)
    except BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    notes.append(f"bench took {(time.perf_counter() - start) / 60:.1f} min")
    print(report.text_table(rows))
    for note in notes:
        print(textwrap.fill(note, report.WIDTH, initial_indent="  ", subsequent_indent="    "))
    md, csv = report.write(rows, args.out, notes)
    print(f"written: {md}, {csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
