"""The staleness study's grid: its compact spec expanded into an ordinary sweep spec.

`sweeps/whatif/staleness.toml` names the systems, the cluster's splits and each
system's staleness settings; this module turns that into one `[zip]` of rows (system,
R, rounds, layout, the knob) that `harness.studies.sweep.parse_spec` expands and runs
like any sweep. A plain `[grid]` cannot say it: each system varies a knob of its own,
and a split moves GPUs from the trainer to the engine (two fields that move together).

Every run takes the same number of optimizer steps of the same U groups, so that
throughput and lag compare across systems:

- the synchronous systems (and verl-one-step-off, whose lag is set by the same R) vary
  `steps_per_rollout` G, conventional RL's knob: R = G x U groups a rollout, G steps
  on it, a lag of up to G - 1 steps (one-step-off: 2G - 1; sortedrl at its default
  max_lag -1 too, its G updates early, as its groups complete);
- the asynchronous systems vary the staleness knob `plan` searches
  (`harness.studies.plan.knobs.ASYNC_STALENESS`, reused here, not copied), over plan's
  values unless the spec gives others; a round is bookkeeping for them (R = U);
- PipelineRL varies `max_lag`, APRIL its over-sampling, slime-async its groups in
  flight per engine (it has no bound: that is what sets its lag); RollPacker has none.
"""

from __future__ import annotations

import copy
from typing import Any

from harness.core.config import ConfigError, RunConfig
from harness.core.config_io import apply, get_path
from harness.studies.plan.knobs import ASYNC_STALENESS

G = "steps_per_rollout"  # not a config field: R = G x U, rounds = steps / G
# Staleness knobs of the systems plan's ASYNC_STALENESS does not name.
OWN_KNOBS: dict[str, str | None] = {
    **dict.fromkeys(("slime", "cgp", "cgp-fgd", "cgp-tail", "cgp-april", "verl",
                     "verl-one-step-off", "sortedrl", "seer", "tlt"), G),
    "pipelinerl": "max_lag",
    "april": "over_sampling_groups",
    "slime-async": "slime_async.sglang_server_concurrency",
    "rollpacker": None,  # one update per round on the round's own groups: lag 0
}
COLOCATED = ("verl",)  # colocated by definition: it runs on all the GPUs, every split alike
SPEC_KEYS = ("repeats", "steps", "systems", "base", "cluster",
             "values", "fixed")


def knob(system: str) -> str | None:
    """The knob that sets `system`'s staleness (None: it has none)."""
    plan = ASYNC_STALENESS.get(system)
    if plan is not None:
        return plan[0]
    if system not in OWN_KNOBS:
        raise ConfigError(f"systems: {system!r} has no staleness knob known to this study "
                          f"(add it to harness/studies/staleness/grid.py OWN_KNOBS)")
    return OWN_KNOBS[system]


def values(system: str, table: dict[str, Any]) -> list[Any]:
    """The settings run: the spec's, else plan's, else the system's default alone."""
    given = table.get("values", {}).get(system)
    if given is not None:
        if not isinstance(given, list) or not given:
            raise ConfigError(f"values.{system}: expected a non-empty list, got {given!r}")
        return list(given)
    plan = ASYNC_STALENESS.get(system)
    if plan is not None:
        return list(plan[1])
    name = knob(system)
    return [1 if name == G else None] if name is not None else [None]


def _int(table: dict[str, Any], key: str, low: int) -> int:
    value = table.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{key}: expected an integer >= {low}, got {value!r}")
    return value


def window(table: dict[str, Any]) -> int:
    """The optimizer steps every run takes (its figures are read over its steady window:
    harness.core.yardstick's rule, the one every ranking in the tool uses)."""
    return _int(table, "steps", 1)


def splits(table: dict[str, Any]) -> list[tuple[int, int]]:
    """(engine GPUs, trainer GPUs) of each split of `cluster.gpus`."""
    cluster = table.get("cluster")
    if not isinstance(cluster, dict):
        raise ConfigError("cluster: expected a table with gpus and rollout_gpus")
    gpus = _int(cluster, "gpus", 2)
    engine = cluster.get("rollout_gpus")
    if not isinstance(engine, list) or not engine:
        raise ConfigError(f"cluster.rollout_gpus: expected a list, got {engine!r}")
    for n in engine:
        if isinstance(n, bool) or not isinstance(n, int) or not 0 < n < gpus:
            raise ConfigError(f"cluster.rollout_gpus: {n!r} leaves no GPU to the engine or "
                              f"the trainer of {gpus}")
    return [(n, gpus - n) for n in engine]


def _row(system: str, value: Any, layout: dict[str, Any], steps: int, u: int,
         fixed: dict[str, Any]) -> dict[str, Any]:
    """One zip row: the system at one setting on one layout."""
    name = knob(system)
    row: dict[str, Any] = {"system": system, "groups": u, "rounds": steps, **layout,
                           **fixed.get(system, {})}
    if name == G:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1 or steps % value:
            raise ConfigError(f"values.{system}: steps_per_rollout {value!r} must be a positive "
                              f"divisor of steps = {steps}")
        row.update(groups=value * u, rounds=steps // value)
    elif name is not None and value is not None:
        row[name] = value
    return row


def expand(table: dict[str, Any]) -> dict[str, Any]:
    """The study's spec (see the module's docstring) as a sweep spec: [base] and one [zip]."""
    for key in table:
        if key not in SPEC_KEYS:
            raise ConfigError(f"{key}: unknown key of the staleness spec "
                              f"(known: {', '.join(SPEC_KEYS)})")
    steps = window(table)
    systems = table.get("systems")
    if (not isinstance(systems, list) or not systems
            or not all(isinstance(x, str) for x in systems)):
        raise ConfigError(f"systems: expected a list of system names, got {systems!r}")
    for section in ("values", "fixed"):
        if not isinstance(table.get(section, {}), dict):
            raise ConfigError(f"{section}: expected a table of systems")
    for system, fields in table.get("fixed", {}).items():
        if not isinstance(fields, dict):
            raise ConfigError(f"fixed.{system}: expected a table of run fields")
        for key, value in fields.items():  # an unknown or mistyped field, named
            *parents, leaf = key.split(".")
            tree: dict[str, Any] = {leaf: value}
            for parent in reversed(parents):
                tree = {parent: tree}
            apply(RunConfig(), tree, f"fixed.{system}.")
    from systems import SYSTEMS

    for system in [*systems, *table.get("values", {}), *table.get("fixed", {})]:
        if system not in SYSTEMS:
            from harness.core.registry import unknown_name

            raise ConfigError(str(unknown_name("system", system, list(SYSTEMS))))
    for section in ("values", "fixed"):
        for system in table.get(section, {}):
            if system not in systems:
                raise ConfigError(f"{section}.{system}: not among the systems run")
    base = copy.deepcopy(table.get("base", {}))
    u = base.get("update_groups", RunConfig().update_groups)
    fixed = table.get("fixed", {})
    rows = []
    for system in systems:
        if system in COLOCATED:
            gpus = splits(table)[0][0] + splits(table)[0][1]
            layouts = [{"sim.placement": "colocated", "sim.rollout_engines": gpus,
                        "sim.trainer_gpus": gpus}]
        else:
            layouts = [{"sim.placement": "disaggregated", "sim.rollout_engines": e,
                        "sim.trainer_gpus": t} for e, t in splits(table)]
        rows += [_row(system, v, lay, steps, u, fixed)
                 for v in values(system, table) for lay in layouts]
    columns = list(dict.fromkeys(k for row in rows for k in row))
    default = RunConfig()
    zipped = {k: [row.get(k, get_path(default, k)) for row in rows] for k in columns}
    spec: dict[str, Any] = {"base": base, "zip": zipped}
    if "repeats" in table:
        spec["repeats"] = table["repeats"]
    return spec


def setting(system: str, config: dict[str, Any]) -> tuple[str | None, Any]:
    """(knob, value) of a run from its resolved config (a trace header's or a cell's)."""
    name = knob(system)
    if name is None:
        return None, None
    if name == G:
        return G, config["groups"] // config["update_groups"]
    value: Any = config
    for part in name.split("."):
        value = value[part]
    return name, value
