"""`--workload jsonl:PATH`: a dataset of one's own, measured and run in one command.

Why: running one's own data took two commands (`python -m workloads.measure --own`
writes a profile, then `--workload profile:FILE` runs it). Now the workload names the
data. Its profile is written beside it (PATH with the suffix .toml, where the measure
command's documented `--own my.jsonl --out my.toml` puts it) and is the assumptions
file: the measured prompt lengths, and response lengths, pass rate and verifier
latency assumed (`OWN_DEFAULTS`) for the user to edit. Its first line
records the sha256 of the data measured, so a later run reuses the file, the user's
edits with it, and measures again only when the data change; a re-measure replaces
the `[prompt]` table alone and keeps every other line as the user left it. A `.toml`
there that no measurement wrote is refused, never replaced.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

from workloads.problem import DatasetError
from workloads.prompt_stats import METHOD, PromptStats

PREFIX = "jsonl:"

# Assumed where an own dataset says nothing (as workloads/profiles/sci-xw.toml)
OWN_DEFAULTS = {"mean_tokens": 3350.0, "max_tokens": 8192, "pass_rate": 0.4}


def prompt_fields(stats: PromptStats, source: str) -> dict[str, str]:
    """The measured `[prompt]` table of an own dataset's profile, as TOML values (what a
    re-measure replaces; the other tables are the user's)."""
    return {"mu_log": f"{stats.mu_log:.4f}", "sigma_log": f"{stats.sigma_log:.4f}",
            "min": str(stats.min), "max": str(stats.max),
            "source": json.dumps(f"{source}; {METHOD}")}


MEASURED_FROM = "# measured from "  # an own profile's first line: its data and their hash


def measured_line(source: str, digest: str) -> str:
    """The first line of an own dataset's profile: which file, and the sha256 of its
    bytes, that `--workload jsonl:PATH` reuses the measurement by."""
    return f"{MEASURED_FROM}{source}, sha256 {digest}"


def own_profile(name: str, stats: PromptStats, source: str, mean_tokens: float,
                max_tokens: int, pass_rate: float, digest: str) -> str:
    """A whole workload profile (workloads/profiles/*.toml's fields): the measured
    prompt lengths, and the stated assumptions for what prompts cannot tell."""
    assumed = "assumption (python -m workloads.measure --own): edit to your model's"
    summary = json.dumps(f"own dataset {source} ({stats.count} prompts)")
    prompt = "\n".join(f"{k} = {v}" for k, v in prompt_fields(stats, source).items())
    return f"""{measured_line(source, digest)}
name = {json.dumps(name)}
summary = {summary}

[prompt]
# Measured by `python -m workloads.measure --own` as the shipped datasets are.
{prompt}

[response]
# Not in a dataset: the mean length, its cap and the spread are your model's.
mean_tokens = {mean_tokens:g}
max_tokens = {max_tokens}
min_tokens = 64
sigma_between = 0.60
sigma_within = 0.22
source = "{assumed} lengths (spreads as sci-xw's)"

[reward]
pass_rate = {pass_rate:g}
slope = 0.8
source = "{assumed} pass rate"

[verifier]
# math, number and letter are local checks of milliseconds (workloads.own).
kind = "local"
latency_mean_s = 0.05
latency_sigma = 0.5
source = "{assumed} verifier latency"
"""


_DONE: dict[tuple[str, int, int], Path] = {}  # (data file, mtime, size) -> its profile
_SAID: set[str] = set()


def is_own(name: str) -> bool:
    """Whether a workload names a dataset of one's own (`jsonl:PATH`)."""
    return name.startswith(PREFIX)


def data_path(name: str) -> Path:
    return Path(name.removeprefix(PREFIX)).expanduser()


def profile_path(name: str) -> Path:
    """Where the profile of `jsonl:PATH` is written: beside the data, as PATH.toml."""
    return data_path(name).with_suffix(".toml")


def profile_of(name: str) -> Path:
    """The profile file of `jsonl:PATH`, measured now unless its first line holds this
    data's hash already; kept per process (a run loads its workload several times)."""
    path = data_path(name)
    if not path.is_file():
        raise DatasetError(f"{path}: no such file (JSON lines of prompt, answer and verifier; "
                           f"docs/workloads.md)")
    stat = path.stat()
    key = (os.path.realpath(path), stat.st_mtime_ns, stat.st_size)
    if key in _DONE:
        return _DONE[key]
    from workloads.own import digest

    target = profile_path(name)
    old = target.read_text() if target.is_file() else None
    if old is not None and not old.startswith(MEASURED_FROM):
        raise DatasetError(f"{target}: exists and is no measurement of {path.name} (its first "
                           f"line is not '{MEASURED_FROM}...'); move it, or run it as "
                           f"--workload profile:{target}")
    sha = digest(path)
    if old is not None and old.partition("\n")[0].endswith(f"sha256 {sha}"):
        _say(f"{path}: its profile {target} measured it already (the response lengths, "
             f"pass rate and verifier latency there are yours to edit)")
    else:
        _measure(path, target, old, sha)
    _DONE[key] = target
    return target


def _measure(path: Path, target: Path, old: str | None, sha: str) -> None:
    """Measure `path` into `target`: a new profile of the assumed defaults, or `old`
    with its `[prompt]` table and first line replaced."""
    from harness.core.files import write_atomic
    from workloads.check import checked
    from workloads.prompt_stats import prompt_tokens, summarize

    data, _ = checked(path)
    stats = summarize(prompt_tokens(data.problems))
    if old is None:
        text = own_profile(path.stem, stats, path.name, OWN_DEFAULTS["mean_tokens"],
                           int(OWN_DEFAULTS["max_tokens"]), OWN_DEFAULTS["pass_rate"], sha)
        kept = "assumed (workloads.measure's defaults)"
    else:
        text = remeasured(old, prompt_fields(stats, path.name), measured_line(path.name, sha))
        kept = "as you left them"
    write_atomic(target, text)
    _say(f"measured {path} ({stats.count} prompts, mean {stats.mean:.1f} tokens; every "
         f"reference passes its verifier) into {target}: its response lengths, pass rate "
         f"and verifier latency are {kept}; edit them there")


def remeasured(text: str, fields: dict[str, str], first: str) -> str:
    """`text` (a profile) with `first` as its first line and the `[prompt]` table's
    measured fields set to `fields`; every other line, comments included, as it was."""
    lines = text.splitlines()
    table = ""
    for i, line in enumerate(lines):
        bare = line.strip()
        if bare.startswith("["):
            table = bare.strip("[] ")
        key = bare.split("=", 1)[0].strip() if "=" in bare and not bare.startswith("#") else ""
        if table == "prompt" and key in fields:
            lines[i] = f"{key} = {fields[key]}"
    lines[0] = first
    return "\n".join(lines) + "\n"


def _say(message: str) -> None:
    """A note on stderr, once per process: where the assumptions are, each run."""
    if message not in _SAID:
        _SAID.add(message)
        print(textwrap.fill(f"note: {message}", 100, subsequent_indent="  ",
                            break_on_hyphens=False, break_long_words=False), file=sys.stderr)
