"""A continuous-batching inference engine on the virtual clock: its contract (submit,
abort, pause, install) and each request's bookkeeping (its tokens, version spans and
response). Its timeline, the segments of decode steps, admission and preemption by
recomputation, is `harness.sim.batching.Batching`; `SimEngine` is both.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable
from math import inf
from operator import attrgetter
from typing import Any

from harness.core.runtime import EngineLoad, PauseMode, Request, Response
from harness.sim.batching import Batching, _Seq
from harness.sim.co import Wait, sleep
from harness.sim.heap import Entry, Heap
from harness.sim.perf import StepJump


def simulated_response(req: Request, tokens: int, spans: list[list[int]], status: str
                       ) -> Response:
    """A simulated request's response. Truncated when it finished at its `max_tokens`:
    a simulated sample stops only at its drawn length or that cap. (`SimEngine._end` and
    the compiled pool, harness/sim/fastcore, build theirs here.)"""
    return Response(req, tokens, spans, status,  # type: ignore[arg-type]
                    status == "finished" and tokens >= req.max_tokens)


class SimEngine(Batching):
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
        warm: set[int] | None = None,
        keeps: Callable[[str], bool] | None = None,
    ) -> None:
        """`keeps(kind)`: whether the trace keeps a request event of that kind (the
        runtime's `keeps`); one it drops is not built, as the compiled pool does (a
        reproduction's memory-only runs keep only what their readers read; RollPacker's
        readers keep most request events, so its reproduction runs only 0.3% fewer
        instructions, docs/bench.md)."""
        self.index = index
        # this replica's first admission and last finish since the runtime last read them
        # (harness/sim/replica_windows.py); +-inf: none
        self.first_admit, self.last_finish = inf, -inf
        kept = keeps or (lambda ev: True)
        self._keep_submit, self._keep_finish = kept("request_submit"), kept("request_finish")
        self._keep_admit, self._keep_preempt = kept("request_admit"), kept("request_preempt")
        # grouped drafting (sim.spec_group_acceptance): the run's groups with a finished
        # response, shared by its engines; None when off
        self._warm = warm if getattr(decode, "group_alpha", -1.0) >= 0 else None
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
        if self._keep_submit:  # (a dropped kind not built: `__init__`)
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
        return self.abort_now(request_ids)

    def abort_now(self, request_ids: Iterable[str]) -> list[Response]:
        """`abort` as a plain call (it never waits): a group served by callbacks
        aborts its spare samples without a coroutine (harness/sim/serve_keep.py)."""
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
                          kv_tokens=self._capacity, idle=int(self.idle()))

    async def install(self, version: int, transfer_s: float, in_flight: bool,
                      recompute: bool = False, drafter: int | None = None) -> None:
        """New weights: pause (keeping the KV cache), transfer, retag, resume.
        `recompute`: every running sequence goes back to the queue (newest first, so
        they return in admission order) and is prefilled again, prompt and generated
        tokens, when readmitted: vLLM's `reset_prefix_cache(reset_running_requests=
        True)` (vllm/v1/core/sched/scheduler.py `reset_prefix_cache`, vLLM 0.32).
        Not counted as preemptions: the cache was not short. `drafter`: the policy
        version of a drafter sent with the weights (`Trainer.publish`)."""
        was_paused = self.install_begin()
        await sleep(self.loop, transfer_s)
        self.install_end(version, was_paused, recompute, drafter)

    def install_begin(self) -> bool | str:
        """`install`'s first half: stop at the step under way and pause; returns
        whether the engine was paused already (a pool installs on every replica at
        once: begin all, one transfer, end all)."""
        self._cut()
        was_paused = self._paused
        self._paused = True
        return was_paused

    def install_end(self, version: int, was_paused: bool | str, recompute: bool,
                    drafter: int | None = None) -> None:
        """`install`'s second half, once the weights are there."""
        self._cut()
        self.version = version
        retune = getattr(self._decode, "at_version", None)
        if retune is not None:  # speculative decoding: acceptance by the drafter's lag
            self._decode = retune(version, drafter)
        for seq in self._running.values():
            self._close_span(seq)
        if recompute:
            for seq in reversed(list(self._running.values())):
                self._requeue(seq)
                if self._keep_preempt:
                    self._emit("request_preempt", group=seq.req.group,
                               sample=seq.req.sample, reason="recompute")
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
        if seq.chunked and status == "finished":
            status = "aborted"  # its chunk is done, the response is not (`Request.chunk`)
        elif status == "finished" and self._warm is not None:
            self._warm.add(seq.req.group)
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
        resp = simulated_response(req, gen, spans, status)
        self.last_finish = self.loop.now  # (harness/sim/replica_windows.py)
        if self._keep_finish:
            self._emit(  # versions: `Response.versions`
                "request_finish", group=req.group, sample=req.sample, response_tokens=gen,
                status=status, versions=[spans[0][0], spans[-1][0]] if spans else [],
                version_spans=spans,
            )
        seq.done(resp)
        return resp

