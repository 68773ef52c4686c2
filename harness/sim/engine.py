"""A continuous-batching inference engine on the virtual clock.

The engine runs in *segments*: between scheduling events the running batch is
constant, so it plans n decode steps at once (up to the next completion or the
step at which the KV cache would overflow) and sets one timer. Any outside call
(submit, abort, pause, new weights) cuts the segment at the step then running,
exactly as a real engine finishes its current step before it reschedules.

Sequences progress lazily: a sequence admitted at global step g0 with m tokens
has m + (G - g0) tokens at global step G, so a segment costs O(log b) work,
not O(b). Admission is by priority then arrival (FIFO by default); when the
cache is full the most recently admitted sequence is preempted and later
recomputed (its tokens are kept; its prefix is prefilled again on readmission).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import Any

from harness.core.runtime import EngineLoad, PauseMode, Request, Response
from harness.sim.co import Wait, sleep
from harness.sim.heap import Entry, Heap, cancel
from harness.sim.perf import StepJump


class _Seq:
    __slots__ = (
        "req", "done", "target", "ctx0", "gen0", "g0", "spans", "open_version",
        "open_from", "arrival", "state", "admit_no", "rid",
    )

    def __init__(self, req: Request, done: Callable[[Response], Any], target: int,
                 arrival: int, rid: str):
        self.req = req
        self.rid = rid  # the running map's key, formatted once
        self.done = done  # called with the response when the request ends
        self.target = target
        resumed = req.resume
        self.gen0 = resumed.tokens if resumed else 0
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


class SimEngine:
    """Implements `harness.core.runtime.Engine` on the simulator's event heap."""

    def __init__(
        self,
        loop: Heap,
        decode: StepJump,
        kv_capacity_tokens: int,
        max_running: int,
        emit: Callable[..., Any],
        target_tokens: Callable[[Request], int],
        index: int = 0,
        share: Any = None,
    ) -> None:
        self.index = index
        self._share = share  # colocated placement: GPUs shared with the trainer
        self.loop = loop
        self._decode = decode
        self._capacity = kv_capacity_tokens
        self._max_running = max_running
        self._emit = emit
        self._target_tokens = target_tokens
        self.version = 0
        self._steps = 0
        self._running: dict[str, _Seq] = {}
        self._ctx_base = 0  # sum over running of (ctx at admission - admission step)
        self._finish_heap: list[tuple[int, int, _Seq]] = []
        self._waiting: list[tuple[int, int, _Seq]] = []
        self._waiting_n = 0
        self._arrivals = itertools.count()
        self._admits = itertools.count()
        self._paused = False
        self._timer: Entry | None = None
        self._seg: tuple[float, int, int, int] | None = None  # start, n, b, ctx
        self._cut_seg: tuple[float, int, int, int] | None = None  # the last boundary cut's
        self._cut_now = -1.0
        self._replan: Entry | None = None
        self.preemptions = 0
        self._drained: Wait | None = None

    # -- the contract ----------------------------------------------------
    def submit(self, request: Request) -> Wait:
        future = Wait()
        self.submit_then(request, future.set_result)
        return future

    def submit_then(self, request: Request, done: Callable[[Response], Any],
                    rid: str | None = None) -> None:
        """`submit`, calling `done(response)` when the request ends, where `submit` sets
        its future's result (the engine pool's way: it schedules its own callback, as
        the future would, with one future fewer per request). `rid`: `request.id`, where
        the caller has it formatted already (the pool keys its own map by it)."""
        seq = _Seq(request, done, self._target_tokens(request), next(self._arrivals),
                   request.id if rid is None else rid)
        gen0 = seq.gen0
        if seq.target <= gen0:
            raise ValueError(f"request {request.id}: nothing left to generate")
        prompt = request.prompt
        if prompt.index == request.group:  # `prompt_field`, inlined: the common case
            self._emit("request_submit", round=request.round, group=request.group,
                       sample=request.sample, prompt_tokens=prompt.tokens,
                       resumed_tokens=gen0, engine=self.index)
        else:
            self._emit("request_submit", round=request.round, group=request.group,
                       sample=request.sample, prompt_tokens=prompt.tokens,
                       resumed_tokens=gen0, engine=self.index, prompt=prompt.index)
        heapq.heappush(self._waiting, (request.priority, seq.arrival, seq))
        self._waiting_n += 1
        if self._seg is not None:  # `_interrupt`, inlined
            self._cut_at_boundary()
        elif self._replan is None:
            self._replan = self.loop.call_soon(self._plan)

    async def abort(self, request_ids: Iterable[str]) -> list[Response]:
        self._cut()
        wanted = set(request_ids)
        out = [self._end(seq, "aborted") for seq in self._live_seqs(wanted)]
        self._interrupt()
        return out

    async def pause(self, mode: PauseMode = "keep") -> None:
        if mode == "drain" and self._running:
            self._paused = "drain"  # type: ignore[assignment]
            self._drained = Wait()
            await self._drained
        self.pause_now(mode)

    def pause_now(self, mode: PauseMode = "keep") -> None:
        """`pause` but for a drain, which waits: a plain call (a pool pauses each replica
        at every weight sync, most of them idle)."""
        self._cut()
        self._paused = True
        if mode == "abort":
            for seq in self._live_seqs():
                self._end(seq, "aborted")

    async def resume(self) -> None:
        self.resume_now()

    def resume_now(self) -> None:
        self._paused = False
        self._interrupt()

    def idle(self) -> bool:
        return not self._running and self._waiting_n == 0

    def load(self) -> EngineLoad:
        ctx = self._ctx_base + len(self._running) * self._steps
        return EngineLoad(len(self._running), self._waiting_n, ctx / self._capacity,
                          kv_tokens=self._capacity)

    async def install(self, version: int, transfer_s: float, in_flight: bool,
                      recompute: bool = False) -> None:
        """New weights: pause (keeping the KV cache), transfer, retag, resume.
        `recompute`: every running sequence goes back to the queue (newest first, so
        they return in admission order) and is prefilled again, prompt and generated
        tokens, when readmitted: vLLM's `reset_prefix_cache(reset_running_requests=
        True)` (vllm/v1/core/sched/scheduler.py `reset_prefix_cache`, vLLM 0.32).
        Not counted as preemptions: the cache was not short."""
        was_paused = self.install_begin()
        await sleep(self.loop, transfer_s)
        self.install_end(version, was_paused, recompute)

    def install_begin(self) -> bool | str:
        """`install`'s first half: stop at the step under way and pause; returns
        whether the engine was paused already (a pool installs on every replica at
        once: begin all, one transfer, end all)."""
        self._cut()
        was_paused = self._paused
        self._paused = True
        return was_paused

    def install_end(self, version: int, was_paused: bool | str, recompute: bool) -> None:
        """`install`'s second half, once the weights are there."""
        self._cut()
        self.version = version
        for seq in self._running.values():
            self._close_span(seq)
        if recompute:
            for seq in reversed(list(self._running.values())):
                self._requeue(seq)
                self._emit("request_preempt", group=seq.req.group, sample=seq.req.sample,
                           reason="recompute")
        self._paused = was_paused
        self._interrupt()

    # -- bookkeeping -----------------------------------------------------
    def _live_seqs(self, only: set[str] | None = None) -> list[_Seq]:
        """The running requests, then the waiting ones in admission order (those of
        `only`, when given: an abort of one group should not sort the whole queue)."""
        if only is None:
            running = list(self._running.values())
        else:  # the running map is in admission order: looked up, not scanned
            running = sorted((self._running[rid] for rid in only if rid in self._running),
                             key=attrgetter("admit_no"))
        if not self._waiting_n:  # none waits (an idle engine, each pause of a pool)
            return running
        waiting = sorted(e for e in self._waiting if e[2].state == "waiting"
                         and (only is None or e[2].rid in only))
        return running + [e[2] for e in waiting]

    def _close_span(self, seq: _Seq) -> None:
        gen = seq.generated(self._steps)
        if gen > seq.open_from:
            self._add_span(seq, seq.open_version, gen - seq.open_from)
        seq.open_version = self.version
        seq.open_from = gen

    @staticmethod
    def _add_span(seq: _Seq, version: int, tokens: int) -> None:
        if seq.spans and seq.spans[-1][0] == version:
            seq.spans[-1][1] += tokens
        else:
            seq.spans.append([version, tokens])

    def _end(self, seq: _Seq, status: str) -> Response:
        state = seq.state
        if state == "running":  # detached (as `_requeue` does)
            gen = seq.gen0 + (self._steps - seq.g0)
            del self._running[seq.rid]
            self._ctx_base -= seq.ctx0 - seq.g0
            seq.gen0 = gen
        else:
            gen = seq.gen0
            if state == "waiting":
                self._waiting_n -= 1
        seq.state = status
        spans = seq.spans
        if gen > seq.open_from:  # `_add_span`, inlined
            version, tokens = seq.open_version, gen - seq.open_from
            if spans and spans[-1][0] == version:
                spans[-1][1] += tokens
            else:
                spans.append([version, tokens])
        req = seq.req
        resp = Response(req, gen, spans, status,  # type: ignore[arg-type]
                        status == "finished" and gen >= req.max_tokens)
        self._emit(  # versions: `Response.versions`
            "request_finish", group=req.group, sample=req.sample, response_tokens=gen,
            status=status, versions=[spans[0][0], spans[-1][0]] if spans else [],
            version_spans=spans,
        )
        seq.done(resp)
        return resp

    # -- scheduling ------------------------------------------------------
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
            emit("request_admit", group=req.group, sample=req.sample, engine=index)
        if not admitted:
            return 0.0  # what `prefill_time` says of none
        self._ctx_base = base
        self._waiting_n -= admitted
        return self._decode.prefill_time(tokens, squares, admitted)

    def _preempt(self) -> None:
        """Evict the newest running sequence; it is recomputed when readmitted."""
        seq = next(reversed(self._running.values()))
        self._requeue(seq)
        self.preemptions += 1
        self._emit("request_preempt", group=seq.req.group, sample=seq.req.sample)

    def _requeue(self, seq: _Seq) -> None:
        """A running sequence back to the queue, its tokens kept and its cache freed."""
        del self._running[seq.rid]
        self._ctx_base -= seq.ctx0 - seq.g0
        seq.gen0 = seq.gen0 + (self._steps - seq.g0)
        seq.state = "waiting"
        heapq.heappush(self._waiting, (seq.req.priority, seq.arrival, seq))
        self._waiting_n += 1
