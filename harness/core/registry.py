"""Name lookups with "did you mean" errors, shared by systems, workloads and presets."""

from __future__ import annotations

import difflib

# The message's width at most, so that the error line ("error: --workload: " and the
# message) fits 100 columns; a longer list of known names is cut to what fits.
WIDTH = 78
LISTED = {"system": "rolloutbench systems", "workload": "rolloutbench workloads",
          "reproduction": "rolloutbench reproduce --help",
          "what-if study": "rolloutbench whatif --help"}


class UnknownName(KeyError):
    """An unknown system, workload or preset; str() is a one-line message."""

    def __str__(self) -> str:
        return str(self.args[0])


def unknown_name(kind: str, name: str, known: list[str]) -> UnknownName:
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
