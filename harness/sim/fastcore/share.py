"""The GPU share (`GpuShare`, harness/sim/placement.py: a colocated engine and trainer
taking turns on the GPUs) on the compiled pool (harness/sim/fastcore/pool.py), with every
event, time and heap seq of `SimEngine`s sharing the GPUs.

`GpuShare` sees engines through two calls, `idle()` and `wake()`; here each replica is a
`Replica` answering them from the core's arrays. The engine's side of the share is three
rules of `Batching` (harness/sim/batching.py), kept in the compiled `_plan` and
`_segment_end` (timeline.py) with two numbers of the pool's (`g`):

- G_SHARE, who holds the GPUs, set before each turn of the core (`GroupEngines._fire`
  reads `GpuShare.engine_holds`): the owner changes only in the share's coroutines,
  which run as Python's own heap entries, never inside a turn of the core;
- where `_plan` calls `engine_wants` (the trainer holds the GPUs and the replica has
  requests) or `engine_idle` (it found nothing to run), the compiled plan leaves that call
  in G_CALL and the core stops after the entry (`core_run`, `group_run`): `told` makes
  the call at the entry's instant, with the heap's counter where the Python engine's call
  would find it, and the core goes on after it;
- a segment's end replans even on an empty replica (so that it says it is idle).

`wake()` is `Batching.wake`: the replica's `_interrupt` now (a cut at the step under way,
or a replan taking its seq from the heap's counter unless one is due), then the core's
heap entry moved. A wake while a replica is paused or installing (control.py's PAUSED
column; a `SimEngine` answers it with a replan that does nothing) is refused loudly: it
is not compared with the Python path, and `choice.py` admits colocated runs only of
systems that never make one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from harness.sim.fastcore.control import GOING, PAUSED
from harness.sim.fastcore.groups import GroupEngines
from harness.sim.fastcore.jit import njit
from harness.sim.fastcore.timeline import G_SEQ, NOW, WANTS, WSIZE, Arr, B, interrupt
from harness.sim.heap import Heap


@njit(cache=True)
def wake(p: Arr, g: Arr, st2: Arr, fs2: Arr, e: int, now: float) -> None:
    """`Batching.wake` of replica `e` now."""
    fs2[e, NOW] = now
    interrupt(p, g, st2[e], fs2[e])


class CoreShare:
    """`share` over the compiled replicas of `core`: `replicas` are what it attaches as
    its engines; `refuse(what)` raises the pool's refusal."""

    def __init__(self, core: GroupEngines, heap: Heap, share: Any,
                 refuse: Callable[[str], NoReturn]) -> None:
        self._core, self._heap, self._share = core, heap, share
        self._refuse = refuse
        self.replicas = [Replica(self, e) for e in range(core.st.shape[0])]
        core.holds = share.engine_holds
        core.told = self.told

    def told(self, call: int, t: float) -> None:
        """The call a replica's `_plan` made at `t` (the core runs ahead of the clock)."""
        self._heap.now = t
        if call == WANTS:
            self._share.engine_wants()
        else:
            self._share.engine_idle()

    def idle(self, e: int) -> bool:
        st = self._core.st
        return bool(st[e, B] == 0 and st[e, WSIZE] == 0)

    def wake(self, e: int) -> None:
        if (self._core.st[:, PAUSED] != GOING).any():
            self._refuse("wake a replica for the GPU share while paused or installing")
        core, heap = self._core, self._heap
        core.g[G_SEQ] = heap._seq  # noqa: SLF001  (the heap's counter, taken and given back)
        wake(core.p, core.g, core.st, core.fs, e, heap.now)
        heap._seq = int(core.g[G_SEQ])  # noqa: SLF001
        core._arm()  # noqa: SLF001  (its heap entry moves)


class Replica:
    """Replica `e` as `GpuShare` sees an engine."""

    __slots__ = ("_share", "_e")

    def __init__(self, share: CoreShare, e: int) -> None:
        self._share, self._e = share, e

    def idle(self) -> bool:
        """`SimEngine.idle`: nothing running or waiting."""
        return self._share.idle(self._e)

    def wake(self) -> None:
        """`Batching.wake`: replan now (the GPUs came back)."""
        self._share.wake(self._e)
