"""PolyTrace's per-step length logs measured into workload profiles.

PolyTrace (github Zhou-jiecheng/PolyTrace, arXiv 2509.25279) publishes the lengths
of real RLVR training steps. Its repository has no licence of its own, so rolloutbench
ships none of its rows: the `polytrace-*` profiles hold only statistics this module
measured from them (docs/workloads.md says which files, at which commit). Anyone with
the files measures them again, or another run's, with

    python -m workloads.polytrace DIR_OR_FILE... --name NAME --out NAME.toml

Two of its row formats are read, as its benchmark suite writes them:

- `packed_lengths_step_N.jsonl` (verl, verl-video, rllm): one prompt a line,
  `{"step", "input": prompt tokens, "output": [response tokens of each sample]}`;
  rllm's `reward_timings_step_N.jsonl` beside them (`reward_time_s` of a
  `batch_size` of samples) gives the check latency;
- `multiturn_workload_step_N.jsonl` (search_r1): one sample a line, grouped by
  (`step`, `prompt_group_id`), `prompt_len` and `final_response_loss_len` (the
  tokens the model generated over all its turns; the tool results it read are not
  decoded and are left out), `max_response_len` the cap.

The fit is by moments, as `workloads.prompt_stats` fits prompts: the prompt
lognormal from the mean and std of log prompt tokens; the response cap is the one
the rows record, else the longest response; `mean_tokens` the mean response
(capped); `sigma_within` the pooled within-group std of log length (ddof 1) and
`sigma_between` the std of the groups' mean log length with the share the within
spread adds to a mean of K removed (var(mean) = between^2 + within^2 / K). A
profile draws every step alike: the step-to-step drift of the lengths (the
`steps` line of the measurement) is what a profile cannot keep.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.files import not_utf8
from workloads.profile import load_profile
from workloads.prompt_stats import PromptStats, summarize

STEP_FILE = re.compile(r"(packed_lengths|multiturn_workload)_step_(\d+)\.jsonl$")


class PolyTraceError(ValueError):
    """Input that cannot be measured; the message names the file, line and field."""


@dataclass(frozen=True)
class Group:
    """One prompt of a step: its tokens and the response tokens of its samples."""

    step: int
    prompt_tokens: int
    lengths: tuple[int, ...]


@dataclass(frozen=True)
class Rows:
    """What a set of PolyTrace files holds: its complete groups, the cap they record
    (None: none recorded), the check seconds per sample where timed, and how many
    groups were left out for missing samples."""

    groups: list[Group]
    cap: int | None
    verify_s: float | None
    dropped: int


def _whole(row: dict[str, Any], key: str, where: str, least: int = 1) -> int:
    value = row.get(key)
    if key not in row:
        raise PolyTraceError(f"{where}: field {key!r}: missing")
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise PolyTraceError(f"{where}: field {key!r}: must be a whole number >= {least}, "
                             f"got {value!r}")
    return value


def _lines(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(where, row) of each non-blank line of a JSON-lines file."""
    try:
        text = path.read_text("utf-8")
    except OSError as err:
        raise PolyTraceError(f"{path}: cannot read ({err.strerror})") from None
    except UnicodeDecodeError as err:
        raise PolyTraceError(f"{path}: cannot read ({not_utf8(err)})") from None
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise PolyTraceError(f"{where}: not JSON ({err.msg})") from None
        if not isinstance(row, dict):
            raise PolyTraceError(f"{where}: not a JSON object")
        out.append((where, row))
    return out


def _files(paths: list[Path]) -> list[Path]:
    """The step files named, a folder standing for the step files in it, by step."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = [p for p in path.iterdir() if STEP_FILE.search(p.name)]
            if not found:
                raise PolyTraceError(f"{path}: no packed_lengths_step_N.jsonl or "
                                     f"multiturn_workload_step_N.jsonl in it")
            files += sorted(found, key=_step_of)
        elif not path.exists():
            raise PolyTraceError(f"{path}: no such file or folder")
        else:
            files.append(path)
    return files


def _step_of(path: Path) -> int:
    """N of a step file's name (found by STEP_FILE), so that step 10 follows step 9."""
    match = STEP_FILE.search(path.name)
    return int(match.group(2)) if match else -1


def _reward_seconds(folders: set[Path]) -> float | None:
    """Check seconds per sample from rllm's reward_timings files beside the steps."""
    total_s, samples = 0.0, 0
    for folder in folders:
        for path in sorted(folder.glob("reward_timings_step_*.jsonl")):
            for where, row in _lines(path):
                samples += _whole(row, "batch_size", where)
                seconds = row.get("reward_time_s")
                if not isinstance(seconds, int | float) or isinstance(seconds, bool) or \
                        seconds < 0:
                    raise PolyTraceError(f"{where}: field 'reward_time_s': must be a number "
                                         f">= 0, got {seconds!r}")
                total_s += seconds
    return total_s / samples if samples else None


def read(paths: list[Path]) -> Rows:
    """The groups of PolyTrace step files (or folders of them), in file and line order."""
    groups: list[Group] = []
    turns: dict[tuple[int, int], dict[int, int]] = {}  # multi-turn: group -> sample -> len
    prompt_of: dict[tuple[int, int], int] = {}
    caps: set[int] = set()
    for path in _files(paths):
        for where, row in _lines(path):
            step = _whole(row, "step", where, least=0)
            if "output" in row:  # packed_lengths: a prompt and its samples
                out = row["output"]
                if not isinstance(out, list) or not out or not all(
                        isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in out):
                    raise PolyTraceError(f"{where}: field 'output': must be a non-empty list "
                                         f"of whole numbers >= 1, got {out!r}")
                groups.append(Group(step, _whole(row, "input", where), tuple(out)))
            elif "final_response_loss_len" in row:  # multiturn: one sample of a group
                key = (step, _whole(row, "prompt_group_id", where, least=0))
                prompt_of.setdefault(key, _whole(row, "prompt_len", where))
                sample = _whole(row, "sample_id", where, least=0)
                turns.setdefault(key, {})[sample] = _whole(row, "final_response_loss_len",
                                                           where)
                caps.add(_whole(row, "max_response_len", where))
            else:
                raise PolyTraceError(f"{where}: field 'output': missing (a packed_lengths "
                                     f"row), nor 'final_response_loss_len' (a multiturn row)")
    dropped = 0
    if turns:
        k = Counter(len(v) for v in turns.values()).most_common(1)[0][0]
        for key, samples in turns.items():
            if len(samples) < k:
                dropped += 1
                continue
            groups.append(Group(key[0], prompt_of[key],
                                tuple(samples[s] for s in sorted(samples)[:k])))
    if not groups:
        raise PolyTraceError(f"{', '.join(map(str, paths))}: no complete group to measure")
    if len(caps) > 1:
        raise PolyTraceError(f"{', '.join(map(str, paths))}: field 'max_response_len': "
                             f"the rows disagree ({sorted(caps)})")
    folders = {p if p.is_dir() else p.parent for p in paths}
    return Rows(groups, caps.pop() if caps else None, _reward_seconds(folders), dropped)


@dataclass(frozen=True)
class Fit:
    """The measured figures a profile holds, and the ones its comments quote."""

    prompt: PromptStats
    cap: int
    mean_tokens: float
    min_tokens: int
    sigma_between: float
    sigma_within: float
    p50: float
    p90: float
    p99: float
    share_at_cap: float
    groups: int
    k: int
    steps: int
    step_means: tuple[float, float]  # the lowest and highest mean response of a step


def fit(rows: Rows, cap: int | None = None) -> Fit:
    """Moments of the groups (module docstring), at `cap`, else the rows' own."""
    k = min(len(g.lengths) for g in rows.groups)
    recorded = rows.cap or max(max(g.lengths) for g in rows.groups)
    cap = cap or recorded
    lengths = np.minimum(np.array([g.lengths[:k] for g in rows.groups], dtype=float), cap)
    logs = np.log(lengths)
    within = float(np.sqrt(logs.var(axis=1, ddof=1).mean())) if k > 1 else 0.0
    between = math.sqrt(max(float(logs.mean(axis=1).var()) - within**2 / k, 0.0))
    steps = sorted({g.step for g in rows.groups})
    by_step = [lengths[[i for i, g in enumerate(rows.groups) if g.step == s]].mean()
               for s in steps]
    p50, p90, p99 = np.percentile(lengths, [50, 90, 99])
    return Fit(
        prompt=summarize(np.array([g.prompt_tokens for g in rows.groups])), cap=int(cap),
        mean_tokens=float(lengths.mean()), min_tokens=int(lengths.min()),
        sigma_between=between, sigma_within=within, p50=float(p50), p90=float(p90),
        p99=float(p99), share_at_cap=float((lengths >= cap).mean()),
        groups=len(rows.groups), k=k, steps=len(steps),
        step_means=(float(min(by_step)), float(max(by_step))))


def lognormal_by_moments(mean: float, std: float) -> tuple[float, float]:
    """(mu, sigma) of the lognormal with this mean and std: how a published fit that
    gives only moments (PolyTrace's Gaussian mixtures) becomes a profile's."""
    sigma2 = math.log1p((std / mean) ** 2)
    return math.log(mean) - sigma2 / 2, math.sqrt(sigma2)


def mixture_moments(weights: list[float], means: list[float], variances: list[float]
                    ) -> tuple[float, float]:
    """(mean, std) of a mixture: sum w m, and sum w (v + m^2) - mean^2 (weights
    normalised)."""
    total = sum(weights)
    mean = sum(w * m for w, m in zip(weights, means, strict=True)) / total
    second = sum(w * (v + m * m) for w, m, v in zip(weights, means, variances,
                                                    strict=True)) / total
    return mean, math.sqrt(max(second - mean * mean, 0.0))


def to_toml(name: str, summary: str, source: str, f: Fit, verify_s: float | None,
            pass_rate: float) -> str:
    """A whole profile: the measured tables, and the reward and verifier the rows do not
    record, marked as assumptions (a timed check's latency is measured)."""
    at = f"measured by workloads.polytrace from {source}"
    lo, hi = f.step_means
    verifier = (f'kind = "sandbox"\nlatency_mean_s = {verify_s:.3f}\nlatency_sigma = 0.5\n'
                f'source = "{at}: reward_time_s / batch_size (the batch\'s check time per '
                f'sample, as if one after another); sigma an assumption"'
                if verify_s is not None else
                'kind = "local"\nlatency_mean_s = 0.05\nlatency_sigma = 0.5\n'
                'source = "assumption: the rows record no check latency"')
    p = f.prompt
    return f"""# {at}
# {f.groups} groups x {f.k} samples over {f.steps} steps; response p50 {f.p50:.0f}, p90 \
{f.p90:.0f}, p99 {f.p99:.0f}, {100 * f.share_at_cap:.1f}% at the cap;
# steps' mean response {lo:.0f} to {hi:.0f} (a profile draws every step alike)
name = "{name}"
summary = "{summary}"

[prompt]
# {p.count} prompts: mean {p.mean:.1f}, std {p.std:.1f}, p50 {p.p50:.0f}, p90 {p.p90:.0f}
mu_log = {p.mu_log:.4f}
sigma_log = {p.sigma_log:.4f}
min = {p.min}
max = {p.max}
source = "{at}"

[response]
mean_tokens = {f.mean_tokens:.1f}
max_tokens = {f.cap}
min_tokens = {f.min_tokens}
sigma_between = {f.sigma_between:.4f}
sigma_within = {f.sigma_within:.4f}
source = "{at}"

[reward]
pass_rate = {pass_rate:g}
slope = 0.8
source = "assumption: the rows record no rewards"

[verifier]
{verifier}
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m workloads.polytrace",
                                 description="Measure PolyTrace step files into a profile.")
    ap.add_argument("paths", nargs="+", metavar="PATH", help="step files, or folders of them")
    ap.add_argument("--name", required=True, help="the profile's name")
    ap.add_argument("--out", required=True, help="the profile file to write")
    ap.add_argument("--summary", default="PolyTrace workload", help="one line about it")
    ap.add_argument("--source", default=None, help="where the rows came from (default: "
                    "the paths)")
    ap.add_argument("--cap", type=int, default=None,
                    help="response cap (default: the rows' max_response_len, else the "
                         "longest response)")
    ap.add_argument("--pass-rate", type=float, default=0.5, help="assumed (default 0.5)")
    args = ap.parse_args(argv)
    try:
        rows = read([Path(p) for p in args.paths])
        if args.cap is not None and args.cap < 1:
            raise PolyTraceError(f"--cap: must be a whole number >= 1, got {args.cap}")
        if not 0 < args.pass_rate < 1:
            raise PolyTraceError(f"--pass-rate: must be strictly between 0 and 1, got "
                                 f"{args.pass_rate}")
        f = fit(rows, args.cap)
        out = Path(args.out)
        if not out.parent.is_dir():
            raise PolyTraceError(f"--out {out}: no folder {out.parent}")
    except PolyTraceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    source = args.source or ", ".join(args.paths)
    out.write_text(to_toml(args.name, args.summary, source, f, rows.verify_s,
                           args.pass_rate))
    try:  # the figures are ones a run can draw from (a cap below the mean is not)
        load_profile(f"profile:{out}")
    except ValueError as err:
        out.unlink()
        print(f"error: {err} (--cap)", file=sys.stderr)
        return 2
    left = f" ({rows.dropped} groups with missing samples left out)" if rows.dropped else ""
    print(f"{args.name}: {f.groups} groups x {f.k}{left}, mean response {f.mean_tokens:.1f} "
          f"tokens, cap {f.cap}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
