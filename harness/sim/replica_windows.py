"""The replicas' windows: each window's first admission and each replica's last finish,
made as the run goes rather than read from two events a request.

Why: verl-async's summary (harness/studies/reproduce/verl_async/summary.py,
`replica_times`) reads a colocated run's replicas' generation per window, from the
window's first admission to each replica's last finish. Read from events, a run keeps an
admission and a finish event a request for it, which cost verl's colocated 7B runs 1.6x
their CPU (docs/bench.md, thirty-ninth session). So every engine notes both times as it
makes them (the compiled engines in `timeline._emit`, `SimEngine` at its admissions and
ends), and the runtime reads them at each window's edge (a `rollout_start`, and the run's
end) into one `replica_window` record. Only a memory-only run whose reader asks for the
record makes it (`reads(..., instead=...)`, harness/run/execute.py); no trace file holds
one.

A record: `since` (the edge before, 0 for the first), `first_admit` (None: no admission
since), `last_finish` ([[replica, t], ...], by replica, those that finished something
since), each time rounded as the trace rounds an event's time (`round6`). The window is
the engines' since the last edge, so it is the reader's [since, t) when no request
admitted before an edge finishes after it: so for a rollout that starts on idle engines
(verl's colocated rounds; tests/test_replica_windows.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from math import inf
from typing import Any

from harness.sim.trace_buffer import round6

KIND = "replica_window"
EDGES = ("rollout_start", "run_end")  # a window ends just before these are recorded
Marks = tuple[float, list[tuple[int, float]]]  # (first admission, [(replica, last finish)])


def engine_marks(engines: Iterable[Any]) -> Marks:
    """`SimEngine`s' marks since the last call, then cleared."""
    first, lasts = inf, []
    for engine in sorted(engines, key=lambda e: e.index):
        first = min(first, engine.first_admit)
        if engine.last_finish != -inf:
            lasts.append((engine.index, engine.last_finish))
        engine.first_admit, engine.last_finish = inf, -inf
    return first, lasts


class ReplicaWindows:
    """Cuts the engines' marks into `replica_window` records at each edge."""

    def __init__(self, marks: Callable[[], Marks], record: Callable[..., None],
                 clock: Callable[[], float]) -> None:
        self._marks, self._record, self._clock = marks, record, clock
        self._since = 0.0

    def cut(self) -> None:
        first, lasts = self._marks()
        since, first_t, *times = round6([self._since, 0.0 if first == inf else first,
                                         *(t for _, t in lasts)])
        self._record(KIND, since=since, first_admit=None if first == inf else first_t,
                     last_finish=[[e, t] for (e, _), t in zip(lasts, times, strict=True)])
        self._since = self._clock()

    def cutting(self, emit: Callable[..., None]) -> Callable[..., None]:
        """`emit`, each edge's event recorded after the window it ends."""
        def emit_cutting(ev: str, **fields: Any) -> None:
            if ev in EDGES:
                self.cut()
            emit(ev, **fields)
        return emit_cutting
