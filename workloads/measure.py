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

    python -m workloads.measure --own my.jsonl --out my.toml [--mean-tokens N ...]

measures a dataset of one's own (workloads.own: JSON lines of prompt, answer and
verifier) the same way into a whole workload profile, for `--workload
profile:my.toml`, and scores every reference answer with its verifier. The prompt
lengths are measured; response lengths, pass rate and verifier latency cannot be
read from prompts and answers, so they are the options' values (defaults: the
Sci-XW profile's), marked as assumptions in the file for the user to edit. Every
reference answer must pass its own verifier. `rolloutbench run --workload jsonl:my.jsonl`
does the same in one command, writing my.toml beside the data (workloads.own_jsonl).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from workloads.datasets import WORKLOADS, DatasetError, is_available, load, workload_files
from workloads.own_jsonl import OWN_DEFAULTS, own_profile
from workloads.prompt_stats import METHOD, PromptStats, prompt_tokens, summarize
from workloads.tokens import TEMPLATE_OVERHEAD_TOKENS

__all__ = ["METHOD", "TEMPLATE_OVERHEAD_TOKENS", "PromptStats", "main", "prompt_tokens",
           "summarize"]  # the measurement itself lives in workloads.prompt_stats

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


def measure_own(args: argparse.Namespace) -> int:
    """`--own`: measure the file into a profile at --out, after every check (each
    reference answer must pass its own verifier). Bad input: one line, exit 2, nothing
    written."""
    from harness.core.files import overwrites, write_atomic
    from workloads.check import checked
    from workloads.own import digest
    from workloads.profile import load_profile

    path, out = Path(args.own), Path(args.out)
    refused = overwrites("--out", out, [("--own", path)])
    if refused is not None:
        print(f"error: {refused}", file=sys.stderr)
        return 2
    if out.exists() and not args.force:
        print(f"error: --out {out}: exists (--force replaces it)", file=sys.stderr)
        return 2
    if not out.parent.is_dir():
        print(f"error: --out {out}: no folder {out.parent}", file=sys.stderr)
        return 2
    try:
        data, result = checked(path)
    except (DatasetError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stats = summarize(prompt_tokens(data.problems))
    name = args.name or path.stem
    text = own_profile(name, stats, path.name, args.mean_tokens, args.max_tokens,
                       args.pass_rate, digest(path))
    scratch = out.with_name(f".{out.name}.check.toml")
    try:
        scratch.write_text(text)
        load_profile(f"profile:{scratch}")  # the values are ones a run can draw from
    except ValueError as exc:
        print(f"error: {str(exc).replace(str(scratch), 'the profile')} "
              f"(--mean-tokens, --max-tokens, --pass-rate)", file=sys.stderr)
        return 2
    finally:
        scratch.unlink(missing_ok=True)
    write_atomic(out, text)
    print(f"{name}: {stats.count} prompts, mean {stats.mean:.1f} tokens (mu_log "
          f"{stats.mu_log:.4f}, sigma_log {stats.sigma_log:.4f})\n"
          f"all {result['count']} reference answers pass their verifier\n"
          f"wrote {out}: response lengths, pass rate and verifier latency are "
          f"assumptions, edit them")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workloads.measure",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--data-dir", help="data root laid out like shared/data")
    source.add_argument("--own", help="a dataset of your own: JSON lines of prompt, answer "
                        "and verifier (math, number or letter)")
    parser.add_argument("--toml", action="store_true", help="print TOML tables instead")
    parser.add_argument("--out", help="--own: the profile file to write")
    parser.add_argument("--name", help="--own: the profile's name (default: the file's stem)")
    parser.add_argument("--force", action="store_true", help="--own: replace --out")
    for flag, value in OWN_DEFAULTS.items():
        parser.add_argument(f"--{flag.replace('_', '-')}", type=type(value), default=value,
                            help=f"--own: assumed {flag.replace('_', ' ')} "
                                 f"(default {value:g})")
    args = parser.parse_args(argv)
    if args.own:
        if not args.out:
            print("error: --own: give --out FILE.toml, the profile to write", file=sys.stderr)
            return 2
        return measure_own(args)

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
