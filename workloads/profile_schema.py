"""The keys a workload profile file may hold, and the kind of each value.

Why a schema: a profile file's misspelt key (`max_token`) was ignored and the run took
the shipped value (the 8,192 cap), and a string where a number belongs failed as
`could not convert string to float`, naming no field. A config file refuses both
(harness.core.config_io.apply); a profile file now does too, in the same words.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# Every key, by table ("": the top level), with the kind of its value.
_NUMBER, _INTEGER = "a number", "an integer"
SCHEMA: dict[str, dict[str, str]] = {
    "": {"name": "a string", "summary": "a string", "prompt": "a table",
         "response": "a table", "reward": "a table", "verifier": "a table",
         "mixture": "a table"},
    "prompt": {"mu_log": _NUMBER, "sigma_log": _NUMBER, "min": _INTEGER, "max": _INTEGER,
               "source": "a string"},
    "response": {"mean_tokens": _NUMBER, "max_tokens": _INTEGER, "min_tokens": _INTEGER,
                 "sigma_between": _NUMBER, "sigma_within": _NUMBER, "source": "a string"},
    "reward": {"pass_rate": _NUMBER, "slope": _NUMBER, "source": "a string"},
    "verifier": {"latency_mean_s": _NUMBER, "latency_sigma": _NUMBER, "kind": "a string",
                 "tail_share": _NUMBER, "tail_mean_s": _NUMBER, "tail_sigma": _NUMBER,
                 "source": "a string"},
    "mixture": {"components": "a list of strings", "weights": "a list of numbers",
                "length_scale": _NUMBER, "source": "a string"},
}


def _is(value: Any, want: str) -> bool:
    """Whether a TOML value is of the kind `want` names (a bool is no number)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    kinds = {_NUMBER: number, _INTEGER: number and isinstance(value, int),
             "a string": isinstance(value, str), "a table": isinstance(value, dict),
             "a list of strings": isinstance(value, list)
             and all(isinstance(v, str) for v in value),
             "a list of numbers": isinstance(value, list)
             and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)}
    return kinds[want]


def check_keys(data: dict[str, Any]) -> None:
    """ValueError naming the first key no profile has (`response.max_token: unknown
    field (known: ...)`) or the first value of the wrong kind (`response.mean_tokens:
    expected a number, got 'lots'`), as config files are checked."""
    for table, fields in ((t, data.get(t, {}) if t else data) for t in SCHEMA):
        if table and not isinstance(fields, dict):
            continue  # the top level says so
        for key, value in fields.items():
            where = f"{table}.{key}" if table else key
            want = SCHEMA[table].get(key)
            if want is None:
                raise ValueError(f"{where}: unknown field (known: {', '.join(SCHEMA[table])})")
            if not _is(value, want):
                raise ValueError(f"{where}: expected {want}, got {value!r}")


def check_values(p: Any, path: Path) -> Any:
    """`p` (a workloads.profile.Profile: not imported, which imports this module), or
    ValueError naming the first field that no draw can use."""
    rules = (("prompt.min", 1 <= p.prompt_min <= p.prompt_max, "1 <= min <= max"),
             ("response.min_tokens", 1 <= p.min_tokens < p.mean_tokens,
              "at least 1 and below mean_tokens"),
             ("response.max_tokens", p.max_tokens > p.mean_tokens, "above mean_tokens"),
             ("response.sigma_between", p.sigma_between >= 0 and p.sigma_within >= 0
              and p.sigma_between + p.sigma_within > 0, "sigmas >= 0, not both 0"),
             ("reward.pass_rate", 0 < p.pass_rate < 1, "strictly between 0 and 1"),
             ("verifier.latency_mean_s", p.verify_mean_s > 0 and p.verify_sigma >= 0,
              "a mean above 0 and a sigma >= 0"),
             ("verifier.tail_share", 0 <= p.tail_share < 1 and (
                 p.tail_share == 0 or p.tail_mean_s > 0), "in [0, 1), with tail_mean_s > 0"))
    for field_name, ok, want in rules:
        if not ok:
            raise ValueError(f"{path}: {field_name}: must be {want}")
    p.mu_for(p.max_tokens)  # mean_tokens too close to the cap: ValueError naming it
    return p
