"""Stage lines of a live run, read from its trace as it is written.

A live run spends its first minute starting an engine and a trainer, on Ray in
actors whose output the driver does not see. The trace, though, is written on
the driver's node and flushed event by event, so a thread that follows it can
say what the run is doing wherever it runs: starting, the engine ready, each
round. It also says, once, when the system asked for something one live engine
cannot do (the `not_applicable` decision), and only then.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec


class TraceFollower(threading.Thread):
    """Calls `update` with each new stage and `say` with each notice."""

    def __init__(self, path: str | os.PathLike[str], label: str, rounds: int,
                 update: Callable[[str], None], say: Callable[[str], None],
                 every_s: float = 0.5) -> None:
        super().__init__(daemon=True, name="trace-follower")
        self.path, self.label, self.rounds = Path(path), label, rounds
        self.update, self.say, self.every_s = update, say, every_s
        self._halt = threading.Event()
        self._muted = threading.Event()
        self._pos = 0
        self._rest = b""

    def run(self) -> None:
        while not self._halt.wait(self.every_s):
            self.poll()

    def mute(self) -> None:
        """Say nothing more: after Ctrl-C the run takes a few seconds to stop (a Ray
        actor to cancel, an engine to shut down), and rounds it still starts in
        that time are not news."""
        self._muted.set()

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)
        self.poll()  # the last events

    def poll(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._pos)
                data = fh.read()
        except OSError:
            return
        self._pos += len(data)
        *lines, self._rest = (self._rest + data).split(b"\n")
        for line in lines:
            try:
                self.on_event(msgspec.json.decode(line))
            except msgspec.DecodeError:
                continue

    def on_event(self, ev: dict[str, Any]) -> None:
        if self._muted.is_set():
            return
        kind, what = ev.get("ev"), ev.get("what")
        if kind == "run_start":
            self.update(f"{self.label}: starting the engine and the trainer")
        elif kind == "decision" and what == "engine_warm_up":
            self.update(f"{self.label}: engine ready, waiting for the trainer")
        elif kind == "rollout_start":
            self.update(f"{self.label}: round {int(ev.get('round', 0)) + 1} of {self.rounds}")
        elif kind == "decision" and what == "not_applicable":
            self.say(f"{self.label}: not modelled on one live engine, carrying on without "
                     f"it: {ev.get('reason', ev.get('operation'))}")
