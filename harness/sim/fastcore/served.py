"""A group the compiled pool serves whole (`serve_group`, harness/sim/fastcore/groups.py
runs its returns and checks): its K-th return, its last check, and a quiet group's held
responses.

Why quiet groups: in a run whose trace keeps no `request_finish` (a reproduction's
memory-only runs) and whose router places by a rule (verl's static split, verl-fully-
async's round robin: nothing here reads their counts), a group with no gate and no
`on_response` needs nothing of its samples' finishes and returns but the responses
themselves, which the K-th return hands on. So the core makes no row for them (a HELD
finish, a RETURNED return: two rows a request otherwise built, forwarded and let go of
one by one in Python), marks each request in `back`, and Python builds the held
responses in one go with the group's K-th finish (`_fill`), or as an abort hands the
group back to `serve` (harness/sim/fastcore/inflight.py). A response's spans are one
version's as a held row's would be, unless it may span more (`_outcomes`: read from the
core). Measured (verl-async's verl-fully-async runs): docs/bench.md, twenty-second
session. Where the trace keeps the finishes (a written run) such a group is quiet of its
returns only (QUIET_RETURNS): its HELD rows come as before, for their responses and
events, and no RETURNED row (the 1M-request run's structure at 262k requests: 1 row in 3
fewer, 2-4% of the run). Either way its `_live` rows are let go as it ends (`_forget`).

Why silent groups: where the trace keeps no `group_complete` either, a checked quiet
group with no `on_complete` needs nothing of its K-th return but what the last check
needs too (its response, the group complete), and nothing reads the group until that
check ends. So the core takes that return as well (QUIET_SILENT: its seq and its check's
seq the ones `_last_returned` would take), and at the last check Python builds the K
responses, completes the group and scores it in one go: a heap turn and a turn of the
core fewer a group (verl-fully-async's 32:32 run: 8,633 -> 5,583 turns of the core for
3,072 groups; docs/bench.md, thirty-eighth session). Its responses are built after its
last finish, so an install since the group was sent (which moves the version without
moving `_epoch` when nothing is in flight) has them read from the core (`_fill`'s
`read_all`).
"""

from __future__ import annotations

from typing import Any

from harness.core.runtime import Request, Response
from harness.sim.engine import simulated_response
from harness.sim.fastcore.groups import (
    FIRST,
    NO_CHECK,
    QUIET,
    QUIET_ALL,
    QUIET_SILENT,
    RETURNED_QUIET,
    SIZE,
)
from harness.sim.fastcore.timeline import GEN0
from workloads.replay import drawn


class ServedGroups:
    """`CorePool`'s served groups (a mixin: the pool sets what it reads)."""

    _core: Any  # GroupEngines
    _heap: Any
    _router: Any
    _services: dict[int, Any]
    _held: dict[int, list[int]]
    _live: list[Any]
    _samples: list[int]
    _spanned: bool
    _epochs: list[int]
    _epoch: int
    _read: Any
    _quiet: int  # a group's QUIET where it has no gate and no `on_response`
    _silent: bool  # no `group_complete` kept: a group's K-th return may be the core's
    _sent_at: list[int]  # per group row: the pool's version when it was sent
    version: int
    submit_many: Any
    _let_go: Any

    def serve_group(self, requests: list[Request], service: Any, checked: bool = True
                    ) -> None:
        """`submit_many` of a group's samples whose returns and checks the core runs
        (harness/sim/fastcore/groups.py): `service.answered_last(response)` is called at
        the K-th return (as `done`), `service.all_scored()` at the K-th check's end. Each
        check's latency is drawn now as `_Check` draws it (`check_outcome` with no
        timeout: the sample's latency; `serve` sends only samples whose draws are fixed).
        `checked=False` (`serve(score=False)`): no checks; the K-th return ends it."""
        if checked:  # the draws kept for the rewards too (`all_scored`)
            service.draws = drawn(requests[0].prompt.hidden, range(len(requests)))
            latencies = [latency for _, _, latency in service.draws]
        else:
            latencies = [NO_CHECK] * len(requests)
        quiet = self._quiet if service.gate is None and service.on_response is None else 0
        if quiet == QUIET_ALL and checked and service.on_complete is None and self._silent:
            quiet = QUIET_SILENT
        self._services[self._core.group(latencies, quiet)] = service
        self._sent_at.append(self.version)  # (a group row each, in order)
        self.submit_many(requests, service.answered_last, fresh=True)

    def _last_returned(self, i: int) -> None:
        """A turn after a group's K-th finish: `_returned`, its check into the core (its seq
        taken now, as `call_later` takes it in `serve`), then the service's K-th response."""
        request, done, index, response = self._live[i]  # type: ignore[misc]
        self._live[i] = None
        self._router.give_back(index)
        heap, core = self._heap, self._core
        service = self._services[int(core.slot[i])]
        if service.gate is not None:  # `_answered` tells the gate first, then the rest
            service.gate.returned(request.id)
        told = service.on_response
        if told is not None:  # `_answered` tells it first, then starts the check
            told(response)
        took = float(core.latency[i])
        if took == NO_CHECK:  # served unchecked: the group ends with this response
            self._forget(int(core.slot[i]))
            self._let_go(int(core.slot[i]))
            done(response)
            return
        heap._seq += 1  # noqa: SLF001
        core.add_check(i, heap.now + took if took > 0 else heap.now, heap._seq)  # noqa: SLF001
        done(response)

    def _scored(self, i: int, t: float) -> None:
        """Request `i`'s check, at `t`, was its group's last: the service told now, at `t`
        (the core runs ahead of the clock); a silent group's responses built and the group
        completed first."""
        self._heap.now = t
        gs = int(self._core.slot[i])
        held = self._held.pop(gs, None)  # handed back to `serve` (inflight.py): its own
        if held is None:
            if self._core.counts[gs, QUIET] == QUIET_SILENT:  # its K-th return the core's
                self._fill(gs, self._sent_at[gs] != self.version)
                self._services[gs].core_returned()
            self._forget(gs)
            self._services.pop(gs).all_scored()
        else:
            self._services.pop(gs).core_checked(held)

    def _fill(self, gs: int, read_all: bool = False) -> None:
        """The responses of quiet group `gs`'s samples the core holds (it made no HELD
        rows for them: harness/sim/fastcore/groups.py), built as `_forward` builds a
        held one: now, with its K-th finish or as an abort hands it back. None can span
        another version than its row's would have: a sample finished before its K-th,
        and an install in between found that one in flight (`_epoch` moved: read).
        `read_all`: every one read (a silent group's, built at its last check, an install
        since it was sent)."""
        core, live = self._core, self._live
        row = core.counts[gs].tolist()
        first, end = row[FIRST], row[FIRST] + row[SIZE]
        responses, version = self._services[gs].responses, self.version
        # sample k is the core's request first + k (`serve_group` sends 0..K-1 in order)
        backs, made = core.back[first:end].tolist(), core.rq[first:end, GEN0].tolist()
        spanned, epochs, epoch = self._spanned, self._epochs, self._epoch
        read = []  # those that may span more than one version: read from the core
        slots = live[first:end]  # (a slice: no index a sample)
        for k, (back, n, slot) in enumerate(zip(backs, made, slots, strict=True)):
            if back and responses[k] is None:
                req = slot[0]
                if read_all or spanned and (epochs[first + k] != epoch
                                            or req.resume is not None):
                    read.append(first + k)
                else:  # finished at one version (`simulated_response`'s)
                    responses[k] = Response(req, n, [[version, n]], "finished",
                                            n >= req.max_tokens)
        if read:  # as `_outcomes` reads them, in order
            for i, (status, value, spans) in zip(read, self._read(read), strict=True):
                responses[i - first] = simulated_response(live[i][0], value, spans, status)

    def _forget(self, gs: int, returned: bool = False) -> None:
        """Quiet group `gs`'s samples let go of (their `_live` rows, which no RETURNED row
        cleared): all of them as it ends (each returned), or those whose returns the core
        took (`returned`: a group handed back, its others in flight still)."""
        if not self._quiet:  # no group of this pool is
            return
        row = self._core.counts[gs].tolist()
        if not row[QUIET]:
            return
        first, size, live = row[FIRST], row[SIZE], self._live
        if not returned:
            live[first:first + size] = [None] * size
            return
        for k, back in enumerate(self._core.back[first:first + size].tolist()):
            if back == RETURNED_QUIET:
                live[first + k] = None

