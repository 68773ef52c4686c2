"""Whether processes a test started are gone: a fault or a Ctrl-C must leave none behind."""

from __future__ import annotations

import os
import time


def gone(pid: int) -> bool:
    """No process `pid` (a zombie not yet reaped still counts as there)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def all_gone(pids: list[int], within_s: float = 15.0, every_s: float = 0.5) -> bool:
    """Whether every one of `pids` is gone within `within_s`: children exit on their own
    once their parent has gone (an engine core at shutdown, Python's resource tracker
    when its pipe closes), and a pool's own thread reaps its workers: give them a moment."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if all(gone(pid) for pid in pids):
            return True
        time.sleep(every_s)
    return all(gone(pid) for pid in pids)
