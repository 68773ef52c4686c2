"""`stop_workers`: a pool's running work ended with its workers, before it returns."""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor

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
    assert not worker.is_alive() and time.monotonic() - start < 5
