"""Name lookups with "did you mean" errors, shared by systems, workloads and presets; and
what every system class must have, checked as it is registered (`system_problem`).

Why the systems' check at registration: every command reads `name` and `summary`
(`systems` lists them), and `run` reads each of `knobs` off the configuration; a class
that lacks one, or a knob that names no config field, would otherwise surface as a
traceback deep in whichever command touched it first, and a second class of a name
taken would silently replace the first. A built-in class that fails (systems/__init__.py,
where a user adds their own) is refused in one line naming it and its file; a plugin is
skipped with a warning (systems/plugins.py)."""

from __future__ import annotations

import difflib
import inspect
from functools import cache
from typing import Any

from harness.core.fields import ConfigError
from harness.core.notes import shown_path

# The message's width at most, so that the error line ("error: --workload: " and the
# message) fits 100 columns; a longer list of known names is cut to what fits.
WIDTH = 78
LISTED = {"system": "rolloutbench systems", "workload": "rolloutbench workloads",
          "reproduction": "rolloutbench reproduce --help",
          "what-if study": "rolloutbench whatif --help"}
# names a plugin declared but that was skipped as it loaded (systems/plugins.py), by kind:
# why, so that asking for one says so rather than "unknown" (its warning may be long gone)
SKIPPED: dict[str, dict[str, str]] = {}


class UnknownName(KeyError):
    """An unknown system, workload or preset; str() is a one-line message."""

    def __str__(self) -> str:
        return str(self.args[0])


def unknown_name(kind: str, name: str, known: list[str]) -> UnknownName:
    skipped = SKIPPED.get(kind, {}).get(name)
    if skipped is not None:
        return UnknownName(f"{kind} {name!r} is an installed plugin that was skipped: "
                           f"{skipped}")
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    head = f"unknown {kind} {name!r}"
    hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(known)}"
    if len(head + hint) > WIDTH and not close:
        hint = (f"; `{LISTED[kind]}` lists the {len(known)} known" if kind in LISTED
                else f"; known: {shortened(known, WIDTH - len(head) - 9)}")
    return UnknownName(head + hint)


def shortened(names: list[str], width: int) -> str:
    """As many of `names` as fit `width` columns with ", ... (N in all)" after them."""
    for n in range(len(names), 0, -1):
        text = ", ".join(names[:n]) + ("" if n == len(names) else f", ... ({len(names)} in all)")
        if len(text) <= width:
            return text
    return f"... ({len(names)} in all)"


SYSTEM_NEEDS = ("name", "summary", "knobs", "run")


@cache
def _defaults() -> Any:
    from harness.core.config import RunConfig

    return RunConfig()


def _is_field(dotted: str) -> bool:
    cfg = _defaults()
    for part in dotted.split("."):
        if not hasattr(cfg, part):
            return False
        cfg = getattr(cfg, part)
    return True


def system_problem(cls: Any) -> str | None:
    """Why `cls` is not a system (None: it is): the attributes every command reads, a
    non-empty string `name`, a string `summary`, and `knobs` a tuple of config fields."""
    missing = [attr for attr in SYSTEM_NEEDS if not hasattr(cls, attr)]
    if missing:
        return f"not a system (no {', '.join(missing)})"
    if not isinstance(cls.name, str) or not cls.name:
        return "its `name` is not a non-empty string"
    if not isinstance(cls.summary, str):
        return "its `summary` is not a string"
    if not isinstance(cls.knobs, tuple | list) or not all(
            isinstance(k, str) for k in cls.knobs):
        return "its `knobs` is not a tuple of config field names"
    unknown = [k for k in cls.knobs if not _is_field(k)]
    if unknown:
        return (f"its knobs name no config field: {', '.join(unknown)} (see "
                f"'rolloutbench config show')")
    return None


def system_where(cls: Any) -> str:
    """The class and its file, as a user finds it: `CGPEager (systems/cgp_eager.py)`."""
    try:
        path = shown_path(inspect.getsourcefile(cls) or "")
    except TypeError:
        path = ""
    return f"{cls.__qualname__} ({path})" if path else cls.__qualname__


def builtin_systems(classes: tuple[Any, ...]) -> dict[str, Any]:
    """The built-in systems by name, each checked (`system_problem`, a name taken twice): one
    that fails is refused (ConfigError, one line naming it)."""
    found: dict[str, Any] = {}
    for cls in classes:
        why = system_problem(cls)
        if why is None and cls.name in found:
            why = f"the name {cls.name!r} is taken by {system_where(found[cls.name])}"
        if why is not None:
            raise ConfigError(f"system {system_where(cls)}: {why}")
        found[cls.name] = cls
    return found
