"""The keys a workload profile file may hold, and the kind of each value.

Why a schema: a profile file's misspelt key (`max_token`) was ignored and the run took
the shipped value (the 8,192 cap), and a string where a number belongs failed as
`could not convert string to float`, naming no field. A config file refuses both
(harness.core.config_io.apply); a profile file now does too, in the same words.
"""

from __future__ import annotations

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
