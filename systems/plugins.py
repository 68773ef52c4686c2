"""Systems from other packages: the entry-point group `rolloutbench.systems`.

A package declares, in its pyproject.toml,

    [project.entry-points."rolloutbench.systems"]
    mine = "my_package.my_system:MySystem"

and once it is installed beside rolloutbench, `mine` is a system like the
built-in ones (`rolloutbench systems`, `run --system mine`, sweeps, plans). A
plugin that fails to load, lacks a system's attributes or reuses a name already
taken is skipped with a one-line warning naming it: one broken package must not
take the tool down with it.

The project's own checks (the golden traces, `regress`'s `systems = "all"`) cover
its built-in systems only: an installed plugin has no golden trace or baseline
here, and must not make `make test` fail. A plugin opts in where its owner wants
those checks to cover it too, with `ROLLOUTBENCH_CHECK_PLUGINS=mine,other` (or
`all`), then writes its golden trace and baselines as the project's own systems'
are written (tests/test_golden.py, `rolloutbench regress --update`); a regress grid
that names it in `systems` covers it as well.
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from harness.core.registry import SKIPPED, system_problem

GROUP = "rolloutbench.systems"
CHECK_ENV = "ROLLOUTBENCH_CHECK_PLUGINS"  # plugins the project's own checks cover


def problem(cls: Any, entry: EntryPoint, taken: dict[str, Any]) -> str | None:
    """Why a loaded entry point is not a usable system (None: it is)."""
    why = system_problem(cls)
    if why is not None:
        return why
    if cls.name != entry.name:
        return f"its name {cls.name!r} differs from the entry point's"
    if cls.name in taken:
        return f"the name {cls.name!r} is taken by {taken[cls.name].__module__}"
    return None


def load(taken: dict[str, Any]) -> dict[str, Any]:
    """The systems that installed packages declare, by name, in entry-point order."""
    found: dict[str, Any] = {}
    for entry in entry_points(group=GROUP):
        try:
            cls = entry.load()
        except Exception as err:  # noqa: BLE001  (a plugin's own bug: named, skipped)
            why = f"failed to load: {type(err).__name__}: {err}".splitlines()[0]
        else:
            why = problem(cls, entry, {**taken, **found})
        if why is None:
            found[cls.name] = cls
        else:
            print(f"warning: system plugin {entry.name} = {entry.value}: {why}; skipped",
                  file=sys.stderr)
            if entry.name not in taken:  # a name a built-in system holds is no one's loss
                SKIPPED.setdefault("system", {})[entry.name] = why
    return found


def opted_in(found: dict[str, Any]) -> list[str]:
    """The plugins `CHECK_ENV` names ("all": every one), in the order installed; a
    name that is not an installed plugin gets a one-line warning, so a typo does
    not silently leave a system unchecked."""
    wanted = [n.strip() for n in os.environ.get(CHECK_ENV, "").split(",") if n.strip()]
    if wanted == ["all"]:
        return list(found)
    for name in wanted:
        if name not in found:
            print(f"warning: {CHECK_ENV}: {name} is not an installed system plugin "
                  f"(installed: {', '.join(found) or 'none'})", file=sys.stderr)
    return [name for name in found if name in wanted]
