"""A sweep spec (TOML) expanded to its cells: one resolved RunConfig each, keyed by a hash
of it, every cell checked as `run` checks its options before any runs."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import itertools
import json
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.config import ConfigError, RunConfig
from harness.core.config_io import apply, get_path
from harness.core.files import parse_toml

SPEC_KEYS = ("base", "grid", "zip", "repeats")
RANGE_KEYS = {"start", "stop", "step"}


@dataclass
class Cell:
    """One point: its key (the directory name), varied values by dotted name, config."""

    key: str
    varied: dict[str, Any]
    config: RunConfig


@dataclass
class Sweep:
    cells: list[Cell]
    columns: list[str]  # the varied (grid and zip) keys, in spec order
    # varied knob -> the systems that do not read it (their points one cell each)
    unread: dict[str, list[str]] = field(default_factory=dict)


def _nest(key: str, value: Any) -> dict[str, Any]:
    """'sim.rollout_tp', 2 -> {'sim': {'rollout_tp': 2}}: the shape `apply` takes."""
    *parents, leaf = key.split(".")
    tree: dict[str, Any] = {leaf: value}
    for parent in reversed(parents):
        tree = {parent: tree}
    return tree


def _is_range(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and set(value) <= RANGE_KEYS


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested tables ([grid.sim]) to dotted keys; a range table is a value, not a table."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict) and not _is_range(value):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _values(where: str, value: Any) -> list[Any]:
    """A list of values, or {start, stop, step} expanded like Python's range."""
    if isinstance(value, list):
        if not value:
            raise ConfigError(f"{where}: empty list of values")
        return value
    if not _is_range(value):
        raise ConfigError(f"{where}: expected a list of values or {{start=, stop=, step=}}, "
                          f"got {value!r}")
    bounds = {"start": 0, "step": 1, **value}
    for name in ("stop", "start", "step"):
        v = bounds.get(name)
        if isinstance(v, bool) or not isinstance(v, int | float) or (name == "step" and v == 0):
            raise ConfigError(f"{where}.{name}: expected a number (step: not 0), got {v!r}")
    start, stop, step = bounds["start"], bounds["stop"], bounds["step"]
    if all(isinstance(v, int) for v in (start, stop, step)):
        out: list[Any] = list(range(start, stop, step))
    else:  # count first, then multiply: no drift from repeated float addition
        n = max(0, math.ceil((stop - start) / step - 1e-9))
        out = [round(start + i * step, 12) for i in range(n)]
    if not out:
        raise ConfigError(f"{where}: empty range {value!r}")
    return out


def parse_spec(spec: dict[str, Any]) -> Sweep:
    """Expand a spec (a TOML table) into cells; raises ConfigError naming the bad key."""
    for key in spec:
        if key not in SPEC_KEYS:
            raise ConfigError(f"{key}: unknown spec key (known: {', '.join(SPEC_KEYS)})")
        if key != "repeats" and not isinstance(spec[key], dict):
            raise ConfigError(f"{key}: expected a table")
    base = spec.get("base", {})
    for key in set(SPEC_KEYS) & set(base):  # TOML puts keys written after [base] inside it
        raise ConfigError(f"base.{key}: not a run field; write top-level keys such as "
                          "repeats before the first [table]")
    template = RunConfig()
    apply(template, base, "base.")
    grid = {k: _values(f"grid.{k}", v) for k, v in _flatten(spec.get("grid", {})).items()}
    zipped = {k: _values(f"zip.{k}", v) for k, v in _flatten(spec.get("zip", {})).items()}
    for key in grid.keys() & zipped.keys():
        raise ConfigError(f"zip.{key}: also in [grid]; vary a field in one place")
    for section, table in (("grid.", grid), ("zip.", zipped)):
        for key, values in table.items():  # type-check each value once, naming its key
            for value in values:
                apply(copy.deepcopy(template), _nest(key, value), section)
    if len({len(v) for v in zipped.values()}) > 1:
        sizes = ", ".join(f"{k}={len(v)}" for k, v in zipped.items())
        raise ConfigError(f"zip: lists must have equal lengths ({sizes})")
    repeats = spec.get("repeats")
    if repeats is not None:
        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
            raise ConfigError(f"repeats: expected a positive integer, got {repeats!r}")
        if "seed" in grid or "seed" in zipped:
            raise ConfigError("repeats: sets the seeds; do not also vary seed")
    seeds: list[int | None] = list(range(repeats)) if repeats is not None else [None]
    rows = zip(*zipped.values(), strict=True)
    zip_rows = [dict(zip(zipped, row, strict=True)) for row in rows] or [{}]
    cells: dict[str, Cell] = {}
    unread: dict[str, list[str]] = {}
    for combo in itertools.product(*grid.values()):
        for zrow in zip_rows:
            varied = {**dict(zip(grid, combo, strict=True)), **zrow}
            for seed in seeds:
                cell = make_cell(template, varied, seed)
                cells.setdefault(cell.key, cell)  # a duplicate point runs once
                for key in (k for k, v in cell.varied.items() if v is None):
                    systems = unread.setdefault(key, [])
                    if cell.config.system not in systems:
                        systems.append(cell.config.system)
    sweep = Sweep(list(cells.values()), [*grid, *zipped], unread)
    check_cells(sweep, template, set(_flatten(base)))
    return sweep


def _problem(cfg: RunConfig) -> str | None:
    """What `run` would refuse in this config, or None."""
    from harness.core.registry import UnknownName
    from harness.run.checks import check_run

    try:
        check_run(copy.deepcopy(cfg))
    except (ConfigError, UnknownName) as err:
        return str(err)
    return None


def check_cells(sweep: Sweep, base: RunConfig, given: set[str] = frozenset()) -> None:
    """Every cell checked as `run` checks its options (system, workload, presets,
    calibration, U divides R, ...) before any runs; the first bad one is a
    ConfigError naming its varied values, or `base` when the base alone is bad. A
    check that names a field as `run` would (`--set FIELD=VALUE`) names it as the spec
    gave it, or as its default where `given` (the base's fields) and the cell's do not."""
    for cell in sweep.cells:
        problem = _problem(cell.config)
        if problem is None:
            continue
        said = _as_given(problem, given | set(cell.varied))
        if not cell.varied or _problem(base) == problem:
            raise ConfigError(f"base: {said}")
        values = ", ".join(f"{k}={v!r}" for k, v in cell.varied.items())
        raise ConfigError(f"cell {values}: {said}")


_SET = re.compile(r"^--set ([\w.]+)=([^:\s]*): (.*)$", re.S)


def _as_given(problem: str, given: set[str]) -> str:
    """`--set sim.rollout_tp=2: ...` (what `run` says) as the spec has it: `sim.rollout_tp
    = 2: ...` where it gave the field, `sim.rollout_tp=2 (the default): ...` where not;
    a sweep has no --set."""
    found = _SET.match(problem)
    if found is None:
        return problem
    field, value, rest = found.groups()
    return (f"{field} = {value}: {rest}" if field in given
            else f"{field}={value} (the default): {rest}")


def make_cell(template: RunConfig, varied: dict[str, Any], seed: int | None) -> Cell:
    """The point's config, keyed by its resolved form. Types were checked in parse_spec
    and values are checked by `check_cells`, before any cell runs. A varied knob its
    system does not read (cgp crossed with frontier = [4, 8]) keeps the base's value and
    is None among the cell's values: the points are one cell, run once, and the table
    does not label one run as two settings."""
    from harness.shared.defaults import resolve_defaults

    cfg = copy.deepcopy(template)
    for key, value in varied.items():
        apply(cfg, _nest(key, value))
    unread = _unread(cfg, varied)
    for key in unread:
        apply(cfg, _nest(key, get_path(template, key)))
    varied = {k: None if k in unread else v for k, v in varied.items()}
    if seed is not None:  # from repeats; else the base's (or a varied) seed
        cfg.seed = seed
    with contextlib.suppress(Exception):  # an unknown workload fails later, in its cell
        resolve_defaults(cfg)
    canon = json.dumps(cfg.to_dict(), sort_keys=True, separators=(",", ":"))
    return Cell(hashlib.sha256(canon.encode()).hexdigest()[:12], dict(varied), cfg)


def _unread(cfg: RunConfig, varied: dict[str, Any]) -> set[str]:
    """The varied fields `cfg.system` does not read (harness.run.knob_check); none for a
    system the checks will refuse by name."""
    from harness.core.registry import UnknownName
    from harness.run.knob_check import ignored_fields

    try:
        return {f for f, _ in ignored_fields(cfg.system, cfg, varied)} & set(varied)
    except UnknownName:
        return set()


def ignored_by_cells(sweep: Sweep) -> str:
    """Which systems ignore which knobs in one line ('' when none), for a sweep's note:
    the base's, in the cells' configs, and the varied ones, which `make_cell` took out of
    the cells of systems that do not read them (`sweep.unread`)."""
    from harness.run.knob_check import ignored_line

    return ignored_line((cell.config for cell in sweep.cells), named={}, setter="",
                        unread=sweep.unread)


def load_spec(path: str | os.PathLike[str]) -> Sweep:
    """Read and expand a spec file; errors do not repeat the path (the caller adds it)."""
    try:
        return parse_spec(parse_toml(Path(path).read_bytes()))
    except OSError as err:
        raise ConfigError(str(err.strerror)) from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"not valid TOML: {err}") from None
