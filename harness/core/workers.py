"""Stopping a pool of worker processes now, for a command stopped by Ctrl-C."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor


def stop_workers(pool: ProcessPoolExecutor) -> None:
    """The queued work dropped and the running work ended with its workers, each gone
    before this returns (a caller may then clear what they were writing). The workers
    are read before `shutdown`, which lets go of the pool's list of them: a loop over
    that list after it ended none (a sweep's and a plan's ran on). Killed, not asked to
    end: a worker is forked with its parent's handlers, and one that caught SIGTERM
    (`run` and `plan` set one) went on with its run."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for worker in workers:
        worker.kill()
    for worker in workers:
        worker.join(5)
