"""A `RunConfig` from words: a TOML file (`--config`), `--set section.field=value`, a
trace's header, each value coerced to its field's declared type with one line naming the
field when it cannot be; and the fields listed by their dotted names (`config show`).

Split from `config.py` by meaning: that module is what a run's configuration is and
what makes it valid; this one, how it is read and written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import math
import tomllib
from pathlib import Path
from typing import Any

from harness.core.config import ConfigError, RunConfig
from harness.core.files import parse_toml

# A field's declared type (its annotation, a string here) -> (Python type, name in messages).
TYPES: dict[str, tuple[type, str]] = {
    "str": (str, "str"),
    "int": (int, "int"),
    "float": (float, "float"),
    "bool": (bool, "bool (true or false)"),
    "float | None": (float, "float"),
    "int | None": (int, "int"),
}


def type_name(f: dataclasses.Field[Any]) -> str:
    """The declared type of a config field, as written in the dataclass."""
    return f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))


class CliText(str):
    """A value typed on the command line (`--set`): for a field that is not a
    string it is read as a TOML value (a string in a TOML file is not)."""


def _coerce(value: Any, f: dataclasses.Field[Any], where: str) -> Any:
    """Convert a value (a TOML value, or CLI text) to the field's declared type."""
    want, name = TYPES[type_name(f)]
    if value is None and type_name(f).endswith("| None"):  # unset, as a trace's header says
        return None
    if isinstance(value, CliText):
        text, value = str(value), str(value)
        if want is not str:
            try:
                value = tomllib.loads(f"v = {text}")["v"]
            except tomllib.TOMLDecodeError:
                raise ConfigError(f"{where}: expected {name}, got {text!r}") from None
    if want is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, want) or (want is int and isinstance(value, bool)):
        raise ConfigError(f"{where}: expected {name}, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}: expected a finite number, got {value!r}")
    return value


class ConfigFile(dict[str, Any]):
    """The tables of a TOML config file; errors in them name the file."""

    def __init__(self, data: dict[str, Any], path: str | Path) -> None:
        super().__init__(data)
        self.path = str(path)


def apply(cfg: Any, data: dict[str, Any], prefix: str = "") -> None:
    """Set fields of a (nested) config dataclass from a dict, rejecting unknown keys
    and values of the wrong type with a message that names the key (and the file)."""
    if isinstance(data, ConfigFile):
        try:
            _apply(cfg, data, prefix)
        except ConfigError as err:
            raise ConfigError(f"--config {data.path}: {err}") from None
    else:
        _apply(cfg, data, prefix)


def _hint(key: str, value: Any, names: dict[str, Any], prefix: str) -> str:
    """What an unknown field may have meant: a near miss, or a field of this level given
    under a table that is not one (`pipelinerl.max_lag` for `max_lag`); else where every
    field is listed (the top level's 50 names ran to 573 columns)."""
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.75)
    if close:
        return f"did you mean {prefix}{close[0]}?"
    inner = [k for k in value if k in names] if isinstance(value, dict) else []
    if inner:
        return f"did you mean {prefix}{inner[0]}? {key} is no table here"
    return f"`rolloutbench config show` lists the {len(names)} known"


def _apply(cfg: Any, data: dict[str, Any], prefix: str) -> None:
    names = {f.name: f for f in dataclasses.fields(cfg)}
    for key, value in data.items():
        where = f"{prefix}{key}"
        if key not in names:  # a near miss is named alone: [sim]'s 60 fields ran to 900 columns
            raise ConfigError(f"{where}: unknown field ({_hint(key, value, names, prefix)})")
        current = getattr(cfg, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: is a table of fields; expected "
                                  f"{where}.FIELD = VALUE, got {value!r}")
            _apply(current, value, f"{where}.")
        elif isinstance(value, dict):
            raise ConfigError(f"{where}: is a single value, not a table "
                              f"(it has no field {next(iter(value), '')!r})")
        else:
            setattr(cfg, key, _coerce(value, names[key], where))


def set_path(cfg: RunConfig, assignment: str) -> None:
    """Apply one `section.field=value` override."""
    if "=" not in assignment:
        raise ConfigError(f"--set {assignment!r}: expected field=value")
    path, value = assignment.split("=", 1)
    parts = [p.strip() for p in path.strip().split(".")]
    if not all(parts):
        raise ConfigError(f"--set {assignment!r}: expected section.field=value")
    *parents, leaf = parts
    tree: dict[str, Any] = {leaf: CliText(value.strip())}
    for parent in reversed(parents):
        tree = {parent: tree}
    try:
        apply(cfg, tree)
    except ConfigError as err:  # as a range check names it: `--set sim.spec_tokens: ...`
        raise ConfigError(f"--set {err}") from None


def from_header(table: dict[str, Any]) -> RunConfig:
    """The config a trace's `run_start` recorded: every field this version knows, with
    its type; a field it cannot read (an older or newer trace's) keeps its default."""
    return _known(RunConfig(), table)


def _known(cfg: Any, table: dict[str, Any]) -> Any:
    for key, value in table.items():
        if dataclasses.is_dataclass(getattr(cfg, key, None)) and isinstance(value, dict):
            _known(getattr(cfg, key), value)
        else:
            with contextlib.suppress(ConfigError):
                apply(cfg, {key: value})
    return cfg


def load_toml(path: str | Path) -> ConfigFile:
    try:
        return ConfigFile(parse_toml(Path(path).read_bytes()), path)
    except OSError as err:
        raise ConfigError(f"--config {path}: {err.strerror}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"--config {path}: {err}") from None


def get_path(cfg: Any, dotted: str) -> Any:
    """The value of a (nested) config field by its dotted name (`areal.max_head_offpolicyness`)."""
    for part in dotted.split("."):
        cfg = getattr(cfg, part)
    return cfg


def config_fields(cfg: Any, prefix: str = "") -> list[tuple[str, dataclasses.Field[Any], Any]]:
    """Every leaf field of a (nested) config as (dotted name, field, value)."""
    out: list[tuple[str, dataclasses.Field[Any], Any]] = []
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            out += config_fields(value, f"{prefix}{f.name}.")
        else:
            out.append((f"{prefix}{f.name}", f, value))
    return out
