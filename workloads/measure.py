"""Measure the prompt-length distribution of each workload from the real data.

    python -m workloads.measure --data-dir ../shared/data [--toml]

Prompt lengths feed the workload profiles, so they are measured, not guessed:
each problem's text is counted with `approx_tokens` plus the fixed chat
template overhead, and the script prints count, mean, std, min, p50, p90, max
and the fitted lognormal (mu, sigma of the natural log of the token count,
maximum-likelihood, so the plain mean and std of the logs). Workloads whose
files are absent are reported as absent rather than failing, since
OlympiadBench is not shipped with the shared data. `--toml` prints the
measured tables in the shape of `workloads/profiles/_prompt_stats.toml`.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workloads.datasets import WORKLOADS, DatasetError, Problem, is_available, load, workload_files
from workloads.tokens import TEMPLATE_OVERHEAD_TOKENS, approx_tokens

METHOD = f"approx_tokens + template overhead {TEMPLATE_OVERHEAD_TOKENS}"


@dataclass(frozen=True, slots=True)
class PromptStats:
    """Summary of one workload's prompt lengths, in tokens (std is population)."""

    count: int
    mean: float
    std: float
    min: int
    p50: float
    p90: float
    max: int
    mu_log: float
    sigma_log: float


def prompt_tokens(problems: list[Problem]) -> np.ndarray:
    """Estimated prompt tokens of each problem, chat template included."""
    return np.array([approx_tokens(p.text) + TEMPLATE_OVERHEAD_TOKENS for p in problems])


def summarize(tokens: np.ndarray) -> PromptStats:
    """The statistics a profile needs, with the lognormal fitted by moments of log."""
    if tokens.size == 0:
        raise ValueError("no prompts to summarize")
    logs = np.log(tokens)
    return PromptStats(
        count=int(tokens.size),
        mean=float(tokens.mean()),
        std=float(tokens.std()),
        min=int(tokens.min()),
        p50=float(np.percentile(tokens, 50)),
        p90=float(np.percentile(tokens, 90)),
        max=int(tokens.max()),
        mu_log=float(logs.mean()),
        sigma_log=float(logs.std()),
    )


def measured_on(workload: str, data_dir: str | os.PathLike[str]) -> str:
    """The data files behind a workload, relative to the data root."""
    root = Path(data_dir)
    return ", ".join(p.relative_to(root).as_posix() for p in workload_files(workload, root))


def to_toml(workload: str, stats: PromptStats, source: str) -> str:
    """One `[workload]` table in the profile snippet's shape."""
    return "\n".join(
        [
            f"[{workload}]",
            f"count = {stats.count}",
            f"mean = {stats.mean:.1f}",
            f"std = {stats.std:.1f}",
            f"min = {stats.min}",
            f"p50 = {stats.p50:.1f}",
            f"p90 = {stats.p90:.1f}",
            f"max = {stats.max}",
            f"mu_log = {stats.mu_log:.4f}",
            f"sigma_log = {stats.sigma_log:.4f}",
            f'measured_on = "{source}"',
            f'method = "{METHOD}"',
        ]
    )


_HEADER = f"{'workload':<9} {'count':>5} {'mean':>7} {'std':>6} {'min':>5} {'p50':>6} " + (
    f"{'p90':>6} {'max':>5} {'mu_log':>7} {'sigma_log':>9}"
)


def _row(workload: str, s: PromptStats) -> str:
    return (
        f"{workload:<9} {s.count:>5} {s.mean:>7.1f} {s.std:>6.1f} {s.min:>5} {s.p50:>6.1f} "
        f"{s.p90:>6.1f} {s.max:>5} {s.mu_log:>7.4f} {s.sigma_log:>9.4f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workloads.measure",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data-dir", required=True, help="data root laid out like shared/data")
    parser.add_argument("--toml", action="store_true", help="print TOML tables instead")
    args = parser.parse_args(argv)

    tables: list[str] = []
    if not args.toml:
        print(f"prompt tokens ({METHOD})")
        print(_HEADER)
    for workload in WORKLOADS:
        if not is_available(workload, args.data_dir):
            missing = [str(p) for p in workload_files(workload, args.data_dir) if not p.is_file()]
            note = f"{workload}: absent ({', '.join(missing)} not found)"
            if args.toml:
                tables.append(f"# {note}")
            else:
                print(note)
            continue
        try:
            stats = summarize(prompt_tokens(load(workload, args.data_dir)))
        except DatasetError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        if args.toml:
            tables.append(to_toml(workload, stats, measured_on(workload, args.data_dir)))
        else:
            print(_row(workload, stats))
    if args.toml:
        print("\n\n".join(tables))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
