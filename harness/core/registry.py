"""Name lookups with "did you mean" errors, shared by systems, workloads and presets."""

from __future__ import annotations

import difflib


class UnknownName(KeyError):
    """An unknown system, workload or preset; str() is a one-line message."""

    def __str__(self) -> str:
        return str(self.args[0])


def unknown_name(kind: str, name: str, known: list[str]) -> UnknownName:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(known)}"
    return UnknownName(f"unknown {kind} {name!r}{hint}")
