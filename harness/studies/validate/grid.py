"""The validation grid: which live runs `rolloutbench validate --grid` makes.

A grid file is TOML:

    [base]                  config fields of every cell (tables for sim/live)
    [[shape]]               what is run: name, then fields (workload, groups, ...)
    [[variant]]             how: name, then fields (system and its knobs)
    [[extra]]               single cells: name, shape (a shape's name), variant
                            (a variant's name), then fields that override both;
                            extras of one name and shape are compared as a shape

The cells are every variant on every shape, then the extras. A field holding a
string like "2R" is that many times the cell's groups per round R (APRIL's
over-sampling of 2R, a frontier of 4U is written as a number). Mistakes stop the
grid before anything runs, naming the file and the entry.
"""

from __future__ import annotations

import copy
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.config import ConfigError, RunConfig
from harness.core.config_io import apply
from harness.core.files import parse_toml


@dataclass
class Cell:
    """One live run of the grid and the names it is reported under."""

    shape: str
    variant: str
    config: RunConfig

    @property
    def name(self) -> str:
        return f"{self.shape} | {self.variant}"

    @property
    def slug(self) -> str:
        text = f"{self.shape}-{self.variant}".lower()
        return "".join(c if c.isalnum() else "-" for c in text).strip("-").replace("--", "-")


def _times_r(value: Any, groups: int) -> Any:
    if isinstance(value, str) and value.endswith("R") and value[:-1].isdigit():
        return int(value[:-1]) * groups
    return value


def _named(entries: Any, kind: str, where: str) -> dict[str, dict[str, Any]]:
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"{where}: [[{kind}]] must be a list of tables")
    out: dict[str, dict[str, Any]] = {}
    for i, entry in enumerate(entries):
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}: [[{kind}]] number {i + 1} needs a name")
        if name in out:
            raise ConfigError(f"{where}: two [[{kind}]] entries are named {name!r}")
        out[name] = {k: v for k, v in entry.items() if k != "name"}
    return out


def make_cell(base: dict[str, Any], fields: list[dict[str, Any]], shape: str, variant: str,
              where: str) -> Cell:
    """Apply base, then each table of fields in order; resolve 'NR' values."""
    cfg = RunConfig()
    try:
        apply(cfg, copy.deepcopy(base))
        merged: dict[str, Any] = {}
        for part in fields:
            merged.update(part)
        plain = {k: v for k, v in merged.items() if not (isinstance(v, str) and v.endswith("R")
                                                          and v[:-1].isdigit())}
        apply(cfg, plain)
        apply(cfg, {k: _times_r(v, cfg.groups) for k, v in merged.items() if k not in plain})
        cfg.runtime = "live"
        cfg.validate()
    except ConfigError as err:
        raise ConfigError(f"{where}: cell {shape} | {variant}: {err}") from None
    return Cell(shape, variant, cfg)


def load_grid(path: Path) -> list[Cell]:
    where = str(path)
    try:
        spec = parse_toml(path.read_bytes())
    except OSError as err:
        raise ConfigError(f"--grid {path}: {err.strerror}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"--grid {path}: {err}") from None
    unknown = set(spec) - {"base", "shape", "variant", "extra"}
    if unknown:
        raise ConfigError(f"{where}: unknown table(s) {', '.join(sorted(unknown))} "
                          "(known: base, shape, variant, extra)")
    base = spec.get("base", {})
    shapes = _named(spec.get("shape", []), "shape", where)
    variants = _named(spec.get("variant", []), "variant", where)
    cells = [make_cell(base, [s, v], sname, vname, where)
             for sname, s in shapes.items() for vname, v in variants.items()]
    extras = spec.get("extra", [])
    if not isinstance(extras, list) or not all(isinstance(e, dict) for e in extras):
        raise ConfigError(f"{where}: [[extra]] must be a list of tables")
    for entry in extras:  # extras may share a name: they form one shape of their own
        extra = dict(entry)
        name = extra.pop("name", "extra")
        shape, variant = extra.pop("shape", None), extra.pop("variant", None)
        if shape not in shapes or variant not in variants:
            raise ConfigError(f"{where}: extra {name!r} needs a shape and a variant of the "
                              f"grid (got {shape!r}, {variant!r})")
        cells.append(make_cell(base, [shapes[shape], variants[variant], extra],
                               f"{shape} {name}", variant, where))
    if not cells:
        raise ConfigError(f"{where}: no cells (give at least one shape and one variant)")
    return cells
