"""The compiled pool's pool-wide calls with requests in flight (harness/sim/fastcore/
pool.py's `CorePool` takes them from here): pause (keep, or abort every live request),
resume, a weight install (begin on every replica, one transfer, end on every replica,
with or without recomputation) and a request resumed from its partial tokens
(`Request.resume`). Each is control.py's compiled call on each replica in index order,
as `EnginePool` calls each `SimEngine` (harness/sim/placement.py), with the heap's seq
counter taken and given back around it; the events it made go to the trace and the
returns of the requests it ended to the heap (the pool's `_forward`) before any Python
runs, each at the seq `SimEngine._end` took for it.

Why here and not in the pool: verl-fully-async's parameter sync (systems/
verl_fully_async.py: `pause("abort")`, publish while paused, `resume`, the aborted
responses sent again with their tokens) is what these calls serve; the idle-only calls
the other systems make are the same calls on idle replicas (the same seqs: a cut of an
idle replica cancels its replan, an `interrupt` takes one where none is due).

A sample of a group the core serves (`serve_group`, harness/sim/fastcore/groups.py) that
a call ends is what `group_run` would make of it if it finished in the call's cut (held,
or the group's K-th return); if it was aborted, its group is handed back to `serve`'s own
path (`_hand_back`): its samples in flight return to `_answered`, the checks the core
runs already stay there and the last of them tells the service (`core_checked`).

An abort of some requests (`abort`, `abort_now`: `EnginePool.abort_now`) is control.py's
`abort` on each replica that holds one of them not yet returned, in index order; the
aborted responses come back in the order the replicas made them. A served group with a
sample aborted is handed back as above; its samples still in flight return to
`_answered` when they end.

What stays refused: a drain with requests in flight (`core_run`'s drain answers are not
taken by the pool).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from heapq import heappush
from typing import Any, NoReturn

import numpy as np

from harness.core.runtime import PauseMode, Request, Response
from harness.sim.co import sleep
from harness.sim.fastcore import control
from harness.sim.fastcore.control import MODES
from harness.sim.fastcore.groups import (
    FIRST,
    NO_CHECK,
    QUIET,
    QUIET_ALL,
    QUIET_SILENT,
    RET,
    RETURNED_QUIET,
    SIZE,
    UNRETURNED,
    UNSCORED,
    t_push,
)
from harness.sim.fastcore.jit import Direct
from harness.sim.fastcore.timeline import (
    DONE,
    G_SEQ,
    PENDING,
    STATE,
    TIMER,
    WAITING,
    WSIZE,
    B,
)

# control.py's calls, through their entry points (harness/sim/fastcore/jit.py's `Direct`:
# the core's own arrays and int64 ones made here; `_each` gives the clock as a float)
PAUSE_NOW, ABORT, RESUME_NOW = (Direct(control.pause_now), Direct(control.abort),
                                Direct(control.resume_now))
INSTALL_BEGIN, INSTALL_END = Direct(control.install_begin), Direct(control.install_end)


class InFlightCalls:
    """`CorePool`'s `abort`, `pause`, `resume`, `install` and resumed submissions (a
    mixin: the pool sets the attributes below)."""

    _core: Any  # GroupEngines
    _heap: Any
    _services: dict[int, Any]
    version: int
    # set once a call found requests in flight or a request was resumed: from then on a
    # response is read from the core (status, spans), not built as one version's, if it
    # may span more: resumed, or in flight at such a call (sent before `_epoch` was last
    # moved, `_epochs` per request: `CorePool._outcomes`)
    _spanned: bool = False
    _epoch = 0
    _controlling: bool = False  # `_forward` of a call's events (`_each`)
    _handed: dict[int, Any]  # served groups handed back to `serve` in this call
    _held: dict[int, list[int]]  # handed back: the samples whose checks the core runs
    _returned: Callable[[int], None]
    _last_returned: Callable[[int], None]
    _live: list[Any]
    _rows: dict[str, int] | None = None  # request id -> its latest row (`_routed`)
    _scanned = 0  # `_live`'s rows `_rows` has read

    _refuse: Callable[[str], NoReturn]
    _forward: Callable[[], None]
    _fill: Callable[[int], None]
    _forget: Callable[..., None]

    # -- the contract's calls --------------------------------------------------
    async def pause(self, mode: PauseMode = "keep") -> None:
        """`EnginePool.pause`: each replica's `pause_now` in turn; "abort" ends every
        live request (its return a turn later); a drain only where nothing runs."""
        if self._busy():
            if mode == "drain":
                self._refuse("drain a replica with requests in flight")
            self._spanned, self._epoch = True, self._epoch + 1
        core, ends = self._core, int(MODES[mode])
        self._each(lambda e, now: PAUSE_NOW.call(
            core.p, core.rq, core.g, core.st, core.fs, core.wh, core.fh, core.rs, core.ev_t,
            core.ev, e, now, ends))

    async def abort(self, request_ids: Iterable[str]) -> list[Response]:
        return self.abort_now(request_ids)

    def abort_now(self, request_ids: Iterable[str]) -> list[Response]:
        """`EnginePool.abort_now`: each replica holding one of them not yet returned (a
        finished one whose return is due still counts: the replica is cut all the same)
        aborts those still waiting or running, in index order; their responses in the
        order they were made, each returned a turn later."""
        by_engine = self._routed(request_ids)
        if not by_engine:
            return []
        core = self._core
        ids = {e: np.array(rows, dtype=np.int64) for e, rows in by_engine.items()}
        orders = self._each(lambda e, now: ABORT.call(
            core.p, core.rq, core.g, core.st, core.fs, core.wh, core.fh, core.rs, core.ev_t,
            core.ev, e, now, ids[e]), sorted(ids))
        live = self._live
        return [live[i][3] for order in orders for i in order.tolist()]

    async def resume(self) -> None:
        core = self._core
        self._each(lambda e, now: RESUME_NOW.call(core.p, core.g, core.st, core.fs, e, now))

    async def install(self, version: int, transfer_s: float, in_flight: bool,
                      recompute: bool = False, drafter: int | None = None) -> None:
        """`EnginePool.install`: begin on every replica, one transfer, end on every
        replica (the drafter's weights: none, speculative decoding stays in Python)."""
        if self._busy():
            self._spanned, self._epoch = True, self._epoch + 1
        core = self._core
        was = self._each(lambda e, now: INSTALL_BEGIN.call(
            core.p, core.rq, core.g, core.st, core.fs, core.fh, core.ev_t, core.ev, e, now))
        await sleep(self._heap, transfer_s)
        if self._busy():
            self._spanned, self._epoch = True, self._epoch + 1
        self.version = version
        version, recompute = int(version), bool(recompute)
        self._each(lambda e, now: INSTALL_END.call(
            core.p, core.rq, core.g, core.st, core.fs, core.wh, core.fh, core.rs, core.ev_t,
            core.ev, core.sp, e, now, version, int(was[e]), recompute))

    def _submit_resumed(self, index: int, request: Request, target: int) -> None:
        """`SimEngine.submit_then` of a request going on from its partial response: its
        prefill is its prompt and those tokens, its spans go on from the response's."""
        resume = request.resume
        assert resume is not None
        if target <= resume.tokens:
            raise ValueError(f"request {request.id}: nothing left to generate")
        self._spanned = True  # one compiled call, no event: request_submit is the pool's
        self._core.submit_resumed(index, request.priority, request.prompt.tokens, target,
                                  resume.tokens, resume.version_spans)

    # -- helpers ---------------------------------------------------------------
    def _routed(self, request_ids: Iterable[str]) -> dict[int, list[int]]:
        """The core's rows of these ids not yet returned, by replica (`EnginePool`'s
        `_live` map, keyed by id: the latest row of an id). The map is made at the first
        abort and each call adds the rows sent since: a run that never aborts keeps
        none, and a request's id is formatted once."""
        live = self._live
        rows = self._rows
        if rows is None:
            rows = self._rows = {}
        for i in range(self._scanned, len(live)):
            slot = live[i]
            if slot is not None:
                rows[slot[0].id] = i
        self._scanned = len(live)
        by_engine: dict[int, list[int]] = {}
        back = self._core.back  # a quiet group's sample the core returned: not live
        for rid in request_ids:
            i = rows.get(rid)
            if i is not None and live[i] is not None and back.item(i) != RETURNED_QUIET:
                by_engine.setdefault(live[i][2], []).append(i)
        return by_engine

    def _busy(self) -> bool:
        """A replica holds a request (waiting or running) or a segment under way."""
        st = self._core.st
        return bool((st[:, B] > 0).any() or (st[:, WSIZE] > 0).any()
                    or (st[:, PENDING] == TIMER).any())

    def _each(self, call: Callable[[int, float], Any],
              replicas: Iterable[int] | None = None) -> list[Any]:
        """`call(e, now)` on each replica (or each of `replicas`) in index order, with
        room for what it makes and the heap's counter; then its events forwarded and the
        core's entry moved."""
        core, heap = self._core, self._heap
        out = []
        for e in range(core.st.shape[0]) if replicas is None else replicas:
            core._begin(e)  # noqa: SLF001  (room; the heap's counter taken)
            out.append(call(e, float(heap.now)))
            heap._seq = int(core.g[G_SEQ])  # noqa: SLF001
        self._controlling = True  # a served sample's end goes to `_member_ended`
        try:
            self._forward()
        finally:
            self._controlling = False
            self._handed.clear()  # every sample in flight of those groups has ended
        core._arm()  # noqa: SLF001
        return out

    # -- a served group's sample ended by a call --------------------------------
    def _member_ended(self, i: int, t: float, seq: int, response: Response) -> None:
        """Request `i`, a sample of a group the core serves, ended in a call (finished in
        the cut, or aborted), its return due at (t, seq): what `group_run` does with a
        finish (held: its return the core's; the K-th: Python's), or, once the group has
        an aborted sample, `serve`'s own path (`_hand_back`)."""
        core = self._core
        gs = int(core.slot[i])
        service = self._handed.get(gs)
        if service is None and response.status == "aborted":
            service = self._hand_back(gs)
        if service is not None:  # `_answered` a turn later, as `EnginePool` returns it
            core.slot[i] = -1
            slot = self._live[i]
            slot[1], slot[3] = service._answered, response  # noqa: SLF001
            heappush(self._heap._queue, [t, seq, self._returned, (i,)])  # noqa: SLF001
            return
        core.counts[gs, UNRETURNED] -= 1
        if core.counts[gs, UNRETURNED] > 0 or core.counts[gs, QUIET] == QUIET_SILENT:
            self._services[gs].responses[response.request.sample] = response
            t_push(core.tt, core.tq, core.tn, t, seq, RET, i)
        else:
            if core.counts[gs, QUIET] == QUIET_ALL:  # its K-th: the samples the core
                self._fill(gs)  # held, built now
            self._live[i][3] = response
            heappush(self._heap._queue, [t, seq, self._last_returned, (i,)])  # noqa: SLF001

    def _hand_back(self, gs: int) -> Any:
        """A sample of served group `gs` was aborted (by a pause with abort, or an abort of
        some requests): its samples in flight go back to `serve`'s own path (each return
        to `_answered`, which sends an aborted one again or checks a finished one by a
        timer of its own), those this call ended through `_handed`, those still waiting
        or running (a partial abort) as requests of no group; the checks the core runs
        already (the samples it held) stay there, and the last of them tells the service
        (`_scored`: `core_checked`), now if none is left."""
        core = self._core
        service = self._services[gs]
        self._handed[gs] = service  # this call's other samples of the group: the same
        first = int(core.counts[gs, FIRST])
        states = core.rq[first:first + int(core.counts[gs, SIZE]), STATE]
        for k in np.flatnonzero((states >= WAITING) & (states < DONE)).tolist():
            core.slot[first + k] = -1
            self._live[first + k][1] = service._answered  # noqa: SLF001
        live = int(core.counts[gs, UNRETURNED])
        core.counts[gs, UNRETURNED] = 0
        core.counts[gs, UNSCORED] -= live
        service.unanswered = live
        if core.counts[gs, QUIET]:  # the samples the core held (built now) and returned
            if core.counts[gs, QUIET] in (QUIET_ALL, QUIET_SILENT):
                self._fill(gs)
            self._forget(gs, returned=True)
        if core.latency[first] == NO_CHECK:  # served unchecked: its held samples are done
            self._let_go(gs)
            return service
        held = [s for s, r in enumerate(service.responses) if r is not None]
        if core.counts[gs, UNSCORED] == 0:  # every check the core ran is over
            self._let_go(gs)
            service.core_checked(held)
        else:
            self._held[gs] = held
        return service

    def _let_go(self, gs: int) -> Any:
        """Served group `gs` is over in the core (no check of it left there): its service,
        no longer the core's, and its requests off the timers' bound."""
        core = self._core
        core.unscored -= int(core.counts[gs, SIZE])
        return self._services.pop(gs)
