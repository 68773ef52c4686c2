"""`stop_workers`: a pool's running work ended with its workers, before it returns."""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from harness.core.workers import stop_workers


def test_a_worker_under_way_is_gone_when_stop_returns() -> None:
    """A loop over the pool's workers after `shutdown` found none (it lets go of them):
    a sweep's and a plan's running cells went on after Ctrl-C."""
    pool = ProcessPoolExecutor(max_workers=1)
    pool.submit(time.sleep, 0.01).result()  # the worker is up
    pool.submit(time.sleep, 60)
    worker = next(iter(pool._processes.values()))  # noqa: SLF001
    start = time.monotonic()
    stop_workers(pool)
    assert time.monotonic() - start < 5 and ended(worker.pid)


def ended(pid: int) -> bool:
    """Whether process `pid` has ended (reaped, or a zombie not yet reaped). Not
    `is_alive()`: the pool's own thread may reap the worker first, and then `is_alive`
    of the Process read before says True of a process that is gone (a CI run saw it)."""
    status = Path(f"/proc/{pid}/status")
    try:
        return "\nState:\tZ" in status.read_text()
    except FileNotFoundError:
        return True
