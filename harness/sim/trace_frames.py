"""A run's kept events read again a frame at a time (`BufferedTraceWriter.replay`).

Why not a list: a reader that goes over a large run's events once or twice (its round
metrics) would otherwise hold every decoded event at once (2 GB at 1M requests); this
holds one frame's.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any, Protocol


class Frames(Protocol):
    """What it reads of `BufferedTraceWriter`: the kept events, a pack's list at a time."""

    def _decoded(self, kinds: Collection[str] | None) -> Iterator[list[dict[str, Any]]]: ...


class EventFrames:
    """A run's kept events (of `kinds`), re-iterable: each pass decodes a frame at a time.
    Indexing gives the first event only (what a reader takes its header from)."""

    def __init__(self, writer: Frames, kinds: Collection[str] | None) -> None:
        self._writer, self._kinds = writer, kinds

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for frame in self._writer._decoded(self._kinds):  # noqa: SLF001
            yield from frame

    def __getitem__(self, index: int) -> dict[str, Any]:
        if index != 0:
            raise IndexError("EventFrames gives its first event only; iterate for the rest")
        for event in self:
            return event
        raise IndexError("no events")
