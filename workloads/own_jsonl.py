"""`--workload jsonl:PATH`: a dataset of one's own, measured and run in one command.

Why: running one's own data took two commands (`python -m workloads.measure --own`
writes a profile, then `--workload profile:FILE` runs it). Now the workload names the
data. Its profile is written beside it (PATH with the suffix .toml, where the measure
command's documented `--own my.jsonl --out my.toml` puts it) and is the assumptions
file: the measured prompt lengths, and response lengths, pass rate and verifier
latency assumed (workloads.measure.OWN_DEFAULTS) for the user to edit. Its first line
records the sha256 of the data measured, so a later run reuses the file, the user's
edits with it, and measures again only when the data change; a re-measure replaces
the `[prompt]` table alone and keeps every other line as the user left it. A `.toml`
there that no measurement wrote is refused, never replaced.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

from workloads.problem import DatasetError

PREFIX = "jsonl:"

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
    from workloads.measure import MEASURED_FROM

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
    from workloads.measure import (
        OWN_DEFAULTS,
        measured_line,
        own_profile,
        prompt_fields,
        prompt_tokens,
        summarize,
    )
    from workloads.own import checked

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
