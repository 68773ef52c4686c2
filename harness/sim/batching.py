"""Continuous batching's step scheduling, the half of `SimEngine` that moves time.

Between scheduling events the running batch is constant, so the engine plans n decode
steps at once (up to the next completion or the step at which the KV cache would
overflow) and sets one timer: a *segment*. Any outside call cuts the segment at the step
then running, as a real engine finishes its step before it reschedules. A sequence
progresses lazily: admitted at global step g0 with m tokens, it has m + (G - g0) at step
G, so a segment costs O(log b), not O(b). Admission is by priority then arrival; with
the cache full the most recently admitted sequence is preempted and later recomputed.

Split from harness/sim/engine.py by meaning: that module is the engine's contract and
each request's bookkeeping; this one, `Batching`, its timeline. `SimEngine` is both.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from math import inf
from typing import Any

from harness.core.runtime import Request, Response
from harness.sim.heap import Entry, Heap, cancel
from harness.sim.perf import StepJump


class _Seq:
    __slots__ = (
        "req", "done", "target", "ctx0", "gen0", "g0", "spans", "open_version",
        "open_from", "arrival", "state", "admit_no", "rid", "chunked",
    )

    def __init__(self, req: Request, done: Callable[[Response], Any], target: int,
                 arrival: int, rid: str):
        self.req = req
        self.rid = rid  # the running map's key, formatted once
        self.done = done  # called with the response when the request ends
        resumed = req.resume
        self.gen0 = resumed.tokens if resumed else 0
        # `Request.chunk`: stop after chunk new tokens, an abort if the response goes on
        self.chunked = bool(req.chunk) and self.gen0 + req.chunk < target
        self.target = self.gen0 + req.chunk if self.chunked else target
        self.spans: list[list[int]] = [list(s) for s in resumed.version_spans] if resumed else []
        self.open_version = -1
        self.open_from = self.gen0
        self.ctx0 = 0
        self.g0 = 0
        self.arrival = arrival
        self.state = "waiting"
        self.admit_no = 0

    def generated(self, steps: int) -> int:
        return self.gen0 + (steps - self.g0) if self.state == "running" else self.gen0


class Batching:
    """The segments, admission and preemption of a `SimEngine` (its state is set there)."""

    loop: Heap
    _keep_admit: bool  # (`SimEngine.__init__`: whether the trace keeps the kind)
    _keep_preempt: bool
    index: int
    version: int
    preemptions: int
    _decode: StepJump
    _capacity: int
    _max_running: int
    _emit: Callable[..., Any]
    _share: Any
    _steps: int
    _running: dict[str, _Seq]
    _ctx_base: int
    _finish_heap: list[tuple[int, int, _Seq]]
    _waiting: list[tuple[int, int, _Seq]]
    _waiting_n: int
    _paused: bool | str
    _timer: Entry | None
    _seg: tuple[float, int, int, int] | None
    _cut_seg: tuple[float, int, int, int] | None
    _cut_now: float
    _replan: Entry | None
    _drained: Any
    _warm: set[int] | None  # grouped drafting: groups with a finished response (or None)

    def _end(self, seq: _Seq, status: str) -> Response:
        raise NotImplementedError  # SimEngine's: a request's end, its response and event

    def idle(self) -> bool:
        raise NotImplementedError

    def wake(self) -> None:
        """Replan now (the GPUs came back after a colocated switch)."""
        self._interrupt()

    def _interrupt(self) -> None:
        """Something changed: cut the segment and replan at the step boundary."""
        if self._seg is not None:
            self._cut_at_boundary()
        elif self._replan is None:
            self._replan = self.loop.call_soon(self._plan)

    def _cut_at_boundary(self) -> None:
        now = self.loop.now
        if self._seg is self._cut_seg and now == self._cut_now:
            return  # cut at this very time already (a burst of submits): same step
        start, n, b, ctx = self._seg  # type: ignore[misc]
        k = self._decode.steps_within(now - start, b, ctx, n)
        self._cut_now = now
        if k < n:
            cancel(self._timer)  # type: ignore[arg-type]
            when = start + self._decode.steps_time(k, b, ctx)
            self._seg = (start, k, b, ctx)
            self._timer = self.loop.call_at(when, self._on_segment_end)
        self._cut_seg = self._seg

    def _cut(self) -> None:
        """Stop now (pause, abort, install): only the steps completed by now count;
        the step in progress is dropped, so an aborted response holds no token
        that was not generated yet."""
        if self._seg is not None:
            start, n, b, ctx = self._seg
            k = self._decode.steps_completed(self.loop.time() - start, b, ctx, n)
            cancel(self._timer)  # type: ignore[arg-type]
            self._seg = None
            self._timer = None
            self._advance(k)
        if self._replan is not None:
            cancel(self._replan)
            self._replan = None

    def _on_segment_end(self) -> None:
        steps = self._steps + self._seg[1]  # type: ignore[index]
        self._seg = None
        self._timer = None
        self._steps = steps  # `_advance`, inlined
        heap = self._finish_heap
        while heap and heap[0][0] <= self._steps:
            seq = heapq.heappop(heap)[2]
            if seq.state == "running" and seq.g0 + seq.target - seq.gen0 <= self._steps:
                self._end(seq, "finished")
        if (self._running or self._waiting or self._share is not None
                or self._drained is not None):
            self._plan()  # else it would find nothing to do (an engine one request at a time)

    def _advance(self, n: int) -> None:
        self._steps += n
        heap = self._finish_heap
        while heap and heap[0][0] <= self._steps:
            _, _, seq = heapq.heappop(heap)
            if seq.state == "running" and seq.g0 + seq.target - seq.gen0 <= self._steps:
                self._end(seq, "finished")

    def _plan(self) -> None:
        self._replan = None
        paused = self._paused
        if paused is True or self._seg is not None:
            return
        share = self._share
        if share is not None and not share.engine_holds():
            if not self.idle():
                share.engine_wants()
            return
        if paused is False:
            prefill = self._admit() if self._waiting else 0.0
        else:
            prefill = 0
        running = self._running
        b = len(running)
        if b == 0:
            drained = self._drained
            if drained is not None and not drained.done():
                drained.set_result(None)
            if share is not None and self._waiting_n == 0:
                share.engine_idle()
            return
        steps, capacity = self._steps, self._capacity
        ctx = self._ctx_base + b * steps
        while ctx + b > capacity and b > 1:
            self._preempt()
            b = len(running)
            ctx = self._ctx_base + b * steps
        heap = self._finish_heap
        while True:  # drop entries of sequences that left or were readmitted since
            due, _, head = heap[0]
            if head.state == "running" and due == head.g0 + head.target - head.gen0:
                break
            heapq.heappop(heap)
        n = due - steps  # max(1, min(due - steps, room)), without the builtins' calls
        room = (capacity - ctx) // b
        if room < n:
            n = room
        if n < 1:
            n = 1
        loop = self.loop
        start = loop.now + prefill
        warm = self._warm
        if warm is not None:  # grouped drafting: priced at this batch's share with a sibling
            self._decode = self._decode.for_batch(  # type: ignore[attr-defined]
                sum(1 for seq in running.values() if seq.req.group in warm) / b)
        self._seg = (start, n, b, ctx)
        self._timer = loop.call_at(start + self._decode.steps_time(n, b, ctx),
                                   self._on_segment_end)

    def _admit(self) -> float:
        """Admit waiting sequences that fit; returns the prefill time they cost."""
        running, steps, capacity = self._running, self._steps, self._capacity
        base = self._ctx_base
        ctx = base + len(running) * steps
        waiting = self._waiting
        if not waiting:
            return 0.0
        if running:  # nothing fits (the usual answer with a full cache): said early
            if ctx + 1 > capacity or len(running) >= self._max_running:
                return 0.0  # not even an empty prompt would fit, or no room in the batch
            head = waiting[0][2]
            if head.state == "waiting" and ctx + head.req.prompt.tokens + head.gen0 >= capacity:
                return 0.0  # the first in line waits, and so do those behind it
        tokens = squares = admitted = 0
        pop, push, finish = heapq.heappop, heapq.heappush, self._finish_heap
        emit, index, version, admits = self._emit, self.index, self.version, self._admits
        keep = self._keep_admit
        max_running = self._max_running
        while waiting and len(running) < max_running:
            seq = waiting[0][2]
            if seq.state != "waiting":
                pop(waiting)
                continue
            req = seq.req
            need = req.prompt.tokens + seq.gen0
            if ctx + need + 1 > capacity and running:
                break
            pop(waiting)
            seq.state = "running"
            seq.ctx0 = need
            seq.g0 = steps
            seq.admit_no = admit_no = next(admits)
            if seq.open_version != version:  # `_close_span`, inlined (generated: gen0)
                gen = seq.gen0
                if gen > seq.open_from:
                    self._add_span(seq, seq.open_version, gen - seq.open_from)
                seq.open_version = version
                seq.open_from = gen
            running[seq.rid] = seq
            base += need - steps
            ctx += need
            tokens += need
            squares += need * need
            admitted += 1
            push(finish, (steps + seq.target - seq.gen0, admit_no, seq))
            if keep:
                emit("request_admit", group=req.group, sample=req.sample, engine=index)
        if not admitted:
            return 0.0  # what `prefill_time` says of none
        if self.first_admit == inf:  # (harness/sim/replica_windows.py)
            self.first_admit = self.loop.now
        self._ctx_base = base
        self._waiting_n -= admitted
        return self._decode.prefill_time(tokens, squares, admitted)

    def _preempt(self) -> None:
        """Evict the newest running sequence; it is recomputed when readmitted."""
        seq = next(reversed(self._running.values()))
        self._requeue(seq)
        self.preemptions += 1
        if self._keep_preempt:
            self._emit("request_preempt", group=seq.req.group, sample=seq.req.sample)

    def _requeue(self, seq: _Seq) -> None:
        """A running sequence back to the queue, its tokens kept and its cache freed."""
        del self._running[seq.rid]
        self._ctx_base -= seq.ctx0 - seq.g0
        seq.gen0 = seq.gen0 + (self._steps - seq.g0)
        seq.state = "waiting"
        heapq.heappush(self._waiting, (seq.req.priority, seq.arrival, seq))
        self._waiting_n += 1
