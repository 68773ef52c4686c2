"""Separate cores for the engine and the trainer of a one-process live run.

On a disaggregated GPU placement the engine, the control node's CPU and the
trainer never share a device, and the simulator models them so. On a small CPU
machine they share every core: vLLM's engine core, this process (the control
loop and the engine client's output handling) and the learner's forward and
backward passes all compete, so each runs slower whenever they overlap, and the
systems that train while they generate (CGP, PipelineRL, ...) look slower live
than their simulated twins for a reason no GPU cluster has.

`live.trainer_cores = N` keeps vLLM's engine core alone on the machine's first
cores (the GPU's part) and puts this process and the learner's own process on
the last N, the learner at a lower priority (`nice`), so the control node is
never queued behind a backward pass. Measured on 2 cores (docs/validation.md):
sharing every core, lsat R=64 runs cgp 80% slower live than simulated; split
this way, within 4%. Calibration taken under the same split measures each side
where it runs.
"""

from __future__ import annotations

import asyncio
import os
import signal
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

from harness.core.config import ConfigError, RunConfig

_before_pin: set[int] | None = None  # this process's mask before `pin_process`


def usable_cores() -> list[int]:
    """The cores this process may run on, in order (as before it was pinned)."""
    return sorted(_before_pin if _before_pin is not None else os.sched_getaffinity(0))


def split(trainer_cores: int) -> tuple[set[int], set[int]]:
    """(engine cores, trainer cores): the trainer takes the last `trainer_cores`."""
    cores = usable_cores()
    if not 0 < trainer_cores < len(cores):
        raise ConfigError(f"--set live.trainer_cores: {trainer_cores} leaves no core for the "
                          f"engine or none for the trainer (this machine lets the run use "
                          f"{len(cores)})")
    return set(cores[:-trainer_cores]), set(cores[-trainer_cores:])


def check(cfg: RunConfig) -> None:
    """`live.trainer_cores` only where this process hosts both sides."""
    n = cfg.live.trainer_cores
    if n == 0:
        return
    if n < 0:
        raise ConfigError("--set live.trainer_cores: must be 0 or more")
    if cfg.live.ray_address != "off":
        raise ConfigError("--set live.trainer_cores: needs live.ray_address = 'off' (one "
                          "process; on Ray, place the actors instead)")
    split(n)


def _set_mask(cores: set[int]) -> None:
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cores)
        except (ProcessLookupError, PermissionError):  # a thread that just ended
            pass


def pin_engine(trainer_cores: int) -> set[int]:
    """Move every thread of this process onto the engine's cores, so the engine
    core started next inherits them, and return the trainer's cores."""
    global _before_pin
    engine, trainer = split(trainer_cores)
    if _before_pin is None:
        _before_pin = set(os.sched_getaffinity(0))
    _set_mask(engine)
    return trainer


def control_beside_trainer(calls: Any) -> None:
    """Once the engine core has started (it keeps the engine's cores), move this
    process (the control loop, the engine client's output handling) to the
    trainer's cores; nothing when the learner is not in its own process."""
    if isinstance(calls, InChild):
        _set_mask(calls.cores)


def unpin() -> None:
    """Give this process back the cores it had before `pin_engine`."""
    global _before_pin
    if _before_pin is not None:
        _set_mask(_before_pin)
        _before_pin = None


_learner: Any = None
LEARNER_NICE = 10  # below the control process that shares its cores


def _start(cfg: RunConfig, cores: set[int]) -> None:
    """The child's initializer: its cores, one torch thread per core, the learner.
    Ctrl-C is the parent's to handle: it shuts this process down."""
    global _learner
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.sched_setaffinity(0, cores)
    os.nice(LEARNER_NICE)
    import torch

    torch.set_num_threads(len(cores))
    from harness.live.learner import make_learner

    _learner = make_learner(cfg)


def _call(method: str, args: tuple[Any, ...]) -> Any:
    return getattr(_learner, method)(*args)


def _run(fn: Any, args: tuple[Any, ...]) -> Any:
    return fn(*args)


class InChild:
    """The learner in a child process pinned to its own cores (a `Calls`).

    A process pool of one worker: a call's arguments and result are pickled
    across (samples and statistics, small), and weights cross as a checkpoint
    folder (`publish_with = 'save'`). A child that dies fails the next call
    with `BrokenProcessPool`, which ends the run with an error."""

    def __init__(self, cfg: RunConfig, cores: set[int]) -> None:
        self.cores = cores
        self._pool = ProcessPoolExecutor(1, mp_context=get_context("spawn"),
                                         initializer=_start, initargs=(cfg, cores))

    async def call(self, method: str, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, _call, method, args)

    async def run(self, fn: Any, *args: Any) -> Any:
        """Any picklable function on the trainer's cores (calibration)."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, _run, fn, args)

    async def ready(self) -> None:
        """Wait until the learner is loaded, so the run's clock starts after it."""
        await self.run(os.getpid)

    def pids(self) -> list[int]:
        return [p.pid for p in self._pool._processes.values()]  # for the fault tests

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
