"""The compiled engines as the simulator's engine pool: `EnginePool`'s part of the Engine
contract over `SteppedEngines` (harness/sim/fastcore/stepped.py), for the runs
harness/sim/fastcore/choice.py lets through.

The router stays in Python (the same `LeastLoaded`, `StaticSplit` or `RoundRobin` object,
asked at each submission and told at each return), each request's target is
`target_tokens`'s, and a response is built as `SimEngine._end` builds it. The core's
events are handed to the trace writer (`record_at`) after each call into it, in the order
they were made and at their own times: the core runs ahead of the heap's clock, never
past the heap's next entry, so no Python event falls between two of its events out of
order. An abort of some requests, pause (keep, abort), resume and a weight install, with
requests in flight or not, and a request resumed from its partial tokens are control.py's
compiled calls (harness/sim/fastcore/inflight.py); once one found requests in flight, a
response's status and version spans are read from the core (in an abort's call only,
for the responses it ends). What the core does not have (a drain with requests in
flight, lend, resize, pull, reconfigure, a chunked request) is refused loudly: the choice
should have kept such a run on the Python path. A group `serve` hands over whole
(`serve_group`: harness/sim/fastcore/served.py) has its returns and checks run by the
core (harness/sim/fastcore/groups.py): Python sees its K-th response and its K-th score
only, and `on_response` of each return (in `_forward`, after the core's turn: it must
leave the heap alone), or of a quiet group neither its other returns nor their finishes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from heapq import heappush
from math import inf
from operator import attrgetter
from typing import Any, NoReturn

from harness.core.runtime import EngineLoad, Request, Response
from harness.sim.co import Wait
from harness.sim.dispatch import ByRule
from harness.sim.engine import simulated_response
from harness.sim.fastcore.control import RECOMPUTE
from harness.sim.fastcore.groups import (
    HELD,
    QUIET,
    QUIET_ALL,
    QUIET_RETURNS,
    RETURNED,
    GroupEngines,
)
from harness.sim.fastcore.inflight import InFlightCalls
from harness.sim.fastcore.served import ServedGroups
from harness.sim.fastcore.stepmodel import Priced
from harness.sim.fastcore.timeline import (
    ADMIT,
    CTX_BASE,
    FINISH,
    FIRST_ADMIT,
    G_NE,
    G_QUIET,
    LAST_FINISH,
    PREEMPT,
    STEPS,
    WSIZE,
    B,
)
from harness.sim.heap import Heap
from harness.sim.placement import LeastLoaded
from harness.sim.trace_events import Makers
from workloads.replay import group_targets, target_tokens

FEW = 4  # `_outcomes` reads this many responses or fewer one by one (`outcome`)
_RESUME, _CHUNK, _REPLICA = attrgetter("resume"), attrgetter("chunk"), attrgetter("replica")


class CorePool(ServedGroups, InFlightCalls):
    """Implements `harness.core.runtime.Engine` over `engines` compiled replicas."""

    lender: Any = None  # the runtime sets one; the core lends none (choice.py)
    relay: tuple[int, float] | None = None

    def __init__(self, heap: Heap, decode: Priced, kv: int,
                 max_running: int, engines: int, gpus: int, tp: int, writer: Any,
                 max_len: int, route: Callable[[int], LeastLoaded],
                 target_tokens: Callable[[Request], int], room: int = 64) -> None:
        """`room`: the core's arrays' first size (`SteppedEngines`; a test starts at 1)."""
        self.max_len, self.tp, self.version = max_len, tp, 0
        self._heap, self._gpus, self._kv = heap, gpus, int(kv)
        self._record = writer.record_at
        self._router = route(engines)
        self._target_tokens = target_tokens
        self._core = GroupEngines(heap, decode, kv, max_running, engines, self._returned,
                                  room)
        self._core.sink = self._forward
        self._core.scored = self._scored
        self._services: dict[int, Any] = {}  # a served group's row in the core -> its service
        self._handed: dict[int, Any] = {}  # (inflight.py: groups handed back to `serve`)
        self._held: dict[int, list[int]] = {}
        self._queue = heap._queue  # noqa: SLF001  (the returns: entries with their own seq)
        self._record_many = writer.record_many
        # a request's events as Structs, or as dicts where the run is held in memory
        self._make = Makers.of(getattr(writer, "written", True))
        self._keep_submit = writer.keeps("request_submit")
        self._kept = tuple(writer.keeps(kind) for kind in (
            "request_admit", "request_preempt", "request_finish"))
        self._core.g[G_QUIET] = not self._kept[0]  # the core writes no admission then
        # a served group may be quiet (`serve_group`) where returns do not route (a
        # rule's router: nothing reads its counts here): of its held finishes too where
        # no finish is written
        # and, where no group_complete is kept, of its K-th return too (served.py)
        self._silent = not writer.keeps("group_complete")
        self._sent_at: list[int] = []  # per group row: the version it was sent at
        self._quiet = (0 if not isinstance(self._router, ByRule)
                       else QUIET_RETURNS if self._kept[2] else QUIET_ALL)
        # per core index: [request, done, replica, response (set at its end)]; None once
        # returned
        self._live: list[list[Any] | None] = []
        # per core index: its request's group and sample (what its events carry)
        self._groups: list[int] = []
        self._samples: list[int] = []
        self._epochs: list[int] = []  # per core index: `_epoch` when it was sent
        self._preemptions = 0

    # -- the contract ------------------------------------------------------
    @property
    def replicas(self) -> int:
        return self._router.active

    @property
    def preemptions(self) -> int:
        return self._preemptions

    def submit(self, request: Request) -> Wait:
        outer = Wait()
        self.submit_then(request, partial(_deliver, outer))
        return outer

    def submit_then(self, request: Request, done: Callable[[Response], Any]) -> None:
        """`EnginePool.submit_then`: routed, then the replica's `submit_then` (a resumed
        request: inflight.py's)."""
        if request.chunk:
            self._refuse("stop a request at a chunk")
        pinned = request.replica
        router = self._router
        index = router.pin(pinned) if 0 <= pinned < router.active else router.take(request)
        target = self._target_tokens(request)
        if target < 1:
            raise ValueError(f"request {request.id}: nothing left to generate")
        self._live.append([request, done, index, None])
        self._epochs.append(self._epoch)
        self._groups.append(request.group)
        self._samples.append(request.sample)
        prompt, resume = request.prompt, request.resume
        if resume is None:
            self._core.submit(index, request.priority, prompt.tokens, target)
            resumed = 0
        else:
            self._submit_resumed(index, request, target)
            resumed = resume.tokens
        if prompt.index == request.group:  # `SimEngine.submit_then`'s event
            self._record(self._heap.now, "request_submit", round=request.round,
                         group=request.group, sample=request.sample,
                         prompt_tokens=prompt.tokens, resumed_tokens=resumed, engine=index)
        else:
            self._record(self._heap.now, "request_submit", round=request.round,
                         group=request.group, sample=request.sample,
                         prompt_tokens=prompt.tokens, resumed_tokens=resumed, engine=index,
                         prompt=prompt.index)

    def submit_many(self, requests: list[Request], done: Callable[[Response], Any],
                    fresh: bool = False) -> None:
        """`submit_then` of each request in turn (a group's samples: `serve`), with one
        call into the core and their request_submit events written at once. Each step is
        a list made at once (routing, targets, the pool's lists, the events), in the order
        `submit_then` would take them one by one: a loop's turn a request was a quarter of
        this call's time in verl-fully-async's runs. `fresh` (`serve_group`'s): one
        group's samples 0..K-1 of one prompt at one priority, K within its drawn lengths,
        none resumed, cut or pinned, so none is looked at for those, and (where the
        pool's targets are the workloads' `target_tokens`) the targets are the prompt's
        first K lengths within the cap, `target_tokens` of each, at once."""
        if not fresh and (any(map(_RESUME, requests)) or any(map(_CHUNK, requests))):
            for request in requests:  # one at a time (what `submit_then` refuses, refused)
                self.submit_then(request, done)
            return
        router = self._router
        if fresh or max(map(_REPLICA, requests), default=-1) < 0:  # none pinned: by rule
            engines = router.take_many(requests)
        else:
            active, pin, take = router.active, router.pin, router.take
            engines = [pin(r.replica) if 0 <= r.replica < active else take(r)
                       for r in requests]
        if fresh and self._target_tokens is target_tokens:  # the workloads' own targets
            first = requests[0]
            targets = group_targets(first.prompt, len(requests), first.max_tokens)
        else:
            targets = list(map(self._target_tokens, requests))
        if targets and min(targets) < 1:
            bad = next(r for r, target in zip(requests, targets, strict=True) if target < 1)
            raise ValueError(f"request {bad.id}: nothing left to generate")
        n = len(requests)
        self._live += [[request, done, index, None]
                       for request, index in zip(requests, engines, strict=True)]
        self._epochs += [self._epoch] * n
        if fresh:  # one group's samples 0..K-1 of one prompt (its priority `serve`'s)
            first = requests[0]
            groups, samples = [first.group] * n, range(n)
            priorities, prompts = [first.priority] * n, [first.prompt.tokens] * n
        else:
            groups, samples = [r.group for r in requests], [r.sample for r in requests]
            priorities = [r.priority for r in requests]
            prompts = [r.prompt.tokens for r in requests]
        self._groups += groups
        self._samples += samples
        self._core.submit_many(engines, priorities, prompts, targets)
        if self._keep_submit:
            now, submit, submit_prompt = self._heap.now, self._make.submit, self._make.submit_prompt
            events = [submit(now, "request_submit", r.round, r.group, r.sample,
                             r.prompt.tokens, 0, index) if r.prompt.index == r.group
                      else submit_prompt(now, "request_submit", r.round, r.group, r.sample,
                                         r.prompt.tokens, 0, index, r.prompt.index)
                      for r, index in zip(requests, engines, strict=True)]
            self._record_many([now] * len(events), events)

    def _returned(self, i: int) -> None:
        """A turn after request `i` ended (`EnginePool._returned`)."""
        request, done, index, response = self._live[i]  # type: ignore[misc]
        self._live[i] = None
        self._router.give_back(index)
        done(response)

    def _forward(self) -> None:
        """The core's new events to the trace, in order, each at its own time; each
        finished request's response built as `SimEngine._end` builds it, and its return
        pushed a turn later (the seq the core took for it: `EnginePool._soon`). Events
        are Structs that encode as `record`'s dicts (harness/sim/trace_events.py), only
        of the kinds the trace keeps.

        Why the loop is written out as it is (it runs for every event the core makes:
        5.5 a request in RolloutPipe's grid, 2 of every 3 an admit or a preempt): the
        kinds in the order of how often they come, a request's group and sample read
        from flat lists (`_groups`, `_samples`) rather than from its slot's request, and
        each event's time handed to the writer as its Struct's own t (the same float
        object), not gathered in a list of its own as the events are made."""
        core = self._core
        ne = core.g.item(G_NE)
        if ne == 0:
            return
        times = core.ev_t[:ne].tolist()
        rows = core.ev[:ne].tolist()
        core.g[G_NE] = 0  # handed over: the core writes its next events from the top
        heap = self._heap
        now, seq0 = heap.now, heap._seq  # noqa: SLF001  (what an `on_response` must leave)
        groups, samples, live, version = self._groups, self._samples, self._live, self.version
        slot_of, last, back, queue = core.slot, self._last_returned, self._returned, self._queue
        counts = core.counts
        services, controlling, give_back = self._services, self._controlling, self._router.give_back
        # (inflight.py) read from the core in a call (an abort), and once spans may differ
        ended = (self._outcomes(rows) if controlling
                 else self._outcomes(rows, version) if self._spanned else None)
        keep_admit, keep_preempt, keep_finish = self._kept
        make = self._make
        admit, preempt, requeue, finish = make.admit, make.preempt, make.requeue, make.finish
        kept: list[Any] = []
        keep = kept.append
        for t, (kind, i, engine, value, seq) in zip(times, rows, strict=True):
            if kind == ADMIT:  # (request_submit: written by `submit_then`)
                if keep_admit:
                    keep(admit(t, "request_admit", groups[i], samples[i], engine))
            elif kind == PREEMPT:
                if value == RECOMPUTE:  # an install's requeue: `install_end`'s event
                    if keep_preempt:
                        keep(requeue(t, "request_preempt", groups[i], samples[i],
                                     "recompute"))
                    continue
                self._preemptions += 1
                if keep_preempt:
                    keep(preempt(t, "request_preempt", groups[i], samples[i]))
            elif kind == HELD or kind == FINISH:
                slot = live[i]
                req = slot[0]  # type: ignore[index]
                if ended is None:  # no call in flight yet, none resumed: one version
                    status, spans = "finished", [[version, value]]
                else:  # aborted or not, its spans across installs (`SimEngine._end`'s)
                    status, value, spans = next(ended)
                response = simulated_response(req, value, spans, status)
                gs = slot_of.item(i)
                if kind == HELD:  # its return is the core's: the group holds it now
                    services[gs].responses[samples[i]] = response
                elif controlling and gs >= 0:  # a served sample, in a call
                    self._member_ended(i, t, seq, response)
                else:
                    if gs >= 0 and counts.item(gs, QUIET) == QUIET_ALL:  # the others' now
                        self._fill(gs)
                    slot[3] = response  # type: ignore[index]
                    heappush(queue, [t, seq, last if gs >= 0 else back, (i,)])
                if keep_finish:
                    keep(finish(t, "request_finish", groups[i], samples[i], value, status,
                                [spans[0][0], spans[-1][0]] if spans else [], spans))
            elif kind == RETURNED:  # a return the core took: the replica back to the router
                slot = live[i]
                give_back(slot[2])  # type: ignore[index]
                live[i] = None
                service = services[slot_of.item(i)]
                if service.gate is not None:  # as `_answered` tells it, first
                    service.gate.returned(slot[0].id)  # type: ignore[index]
                told = service.on_response
                if told is not None:  # at the return's time (the core runs ahead)
                    heap.now = t
                    told(service.responses[samples[i]])
                    heap.now = now
                    if heap._seq != seq0:  # noqa: SLF001
                        _scheduled()
        if kept:
            self._record_many(list(map(make.time, kept)), kept)

    def _outcomes(self, rows: list[list[int]], version: int | None = None
                  ) -> Iterator[tuple[str, int, list[list[int]]]]:
        """The (status, tokens, spans) of each request these events end, in order, read
        from the core. `version` (no call under way: each finished): only those that may
        span more than it are read (resumed, or sent before the last call that found
        requests in flight: `_epoch`); the others ran at `version` alone."""
        ended = [row for row in rows if row[0] == FINISH or row[0] == HELD]
        if version is None:
            return self._read([row[1] for row in ended])
        live, epochs, epoch = self._live, self._epochs, self._epoch
        read = [row[1] for row in ended
                if epochs[row[1]] != epoch or live[row[1]][0].resume is not None]
        if not read:
            return iter([("finished", row[3], [[version, row[3]]]) for row in ended])
        got = dict(zip(read, self._read(read), strict=True))
        return iter([got.get(row[1]) or ("finished", row[3], [[version, row[3]]])
                     for row in ended])

    def _read(self, idx: list[int]) -> Iterator[tuple[str, int, list[list[int]]]]:
        """`_outcomes` of requests `idx`: in one compiled call (`SteppedEngines.outcomes`),
        or one by one when few."""
        if len(idx) <= FEW:  # read in Python: a compiled call and its arrays cost more
            outcome = self._core.outcome
            return iter([outcome(i) for i in idx])
        status, tokens, start, version, count = (a.tolist() for a in self._core.outcomes(idx))
        spans = [[v, c] for v, c in zip(version, count, strict=True)]
        return (("aborted" if status[k] else "finished", tokens[k], spans[start[k]:start[k + 1]])
                for k in range(len(idx)))

    def load(self) -> EngineLoad:
        """`EnginePool.load` from the replicas' arrays (the same sums, in replica order)."""
        st, kv = self._core.st, self._kv
        loads = [(int(st[e, B]), int(st[e, WSIZE]), int(st[e, CTX_BASE] + st[e, B] * st[e, STEPS]))
                 for e in range(self._router.active)]
        return EngineLoad(sum(r for r, _, _ in loads), sum(w for _, w, _ in loads),
                          sum(ctx / kv for _, _, ctx in loads) / len(loads), self.preemptions,
                          self.tp, self._gpus, kv * len(loads), self.max_len,
                          sum(1 for r, w, _ in loads if r == 0 and w == 0))

    async def resize(self, replicas: int) -> int:
        self._refuse("resize the pool")

    async def lend(self, memory_fraction: float, rebalance: bool = False) -> int:
        self._refuse("lend replicas")

    async def reclaim(self) -> int:
        self._refuse("reclaim lent replicas")

    async def pull(self, replica: int) -> int:
        self._refuse("pull weights from the relay")

    async def reconfigure(self, tp: int) -> None:
        self._refuse("rebuild its replicas")

    # -- the GPU share -------------------------------------------------------
    def shared(self, share: Any) -> list[Any]:
        """The replicas as a colocated `GpuShare` sees engines (`idle`, `wake`), the core
        taking turns on the GPUs as `SimEngine`s do (harness/sim/fastcore/share.py)."""
        from harness.sim.fastcore.share import CoreShare

        return CoreShare(self._core, self._heap, share, self._refuse).replicas

    def replica_marks(self) -> tuple[float, list[tuple[int, float]]]:
        """The first admission and each replica's last finish since the last call, then
        cleared (harness/sim/replica_windows.py; `timeline._emit` notes them)."""
        fs = self._core.fs
        first = float(fs[:, FIRST_ADMIT].min())
        lasts = [(e, t) for e, t in enumerate(fs[:, LAST_FINISH].tolist()) if t != -inf]
        fs[:, FIRST_ADMIT], fs[:, LAST_FINISH] = inf, -inf
        return first, lasts

    # -- what the core does not have -----------------------------------------
    def _refuse(self, what: str) -> NoReturn:
        raise RuntimeError(f"the compiled pool cannot {what}; this run should have been on "
                           f"the Python path (harness/sim/fastcore/choice.py)")


def _scheduled() -> NoReturn:
    """A served group's `on_response` of a return the core took is called after the
    core's turn, at the return's time: it must leave the heap alone (verl-fully-async's
    counts a response); one that scheduled anything (a seq taken) would run out of order."""
    raise RuntimeError("a served group's on_response scheduled on the heap: the compiled "
                       "pool calls it after the core's turn, where that is out of order")


def _deliver(wait: Wait, response: Response) -> None:
    """A response to whoever awaits it (nobody, when they cancelled the wait)."""
    if not wait.done():
        wait.set_result(response)
