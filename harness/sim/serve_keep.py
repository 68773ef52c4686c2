"""`serve(keep=...)` on the simulator by callbacks: the first `keep` of `n` samples.

RollPacker's speculative responses (a short round's prompt launches ceil(eta x R0)
samples and keeps the first R0 to finish) as a group service on the heap, no coroutine
a request or a group. It is the step for step twin of the shared coroutine
(`harness.shared.serve._serve_first`, which the live runtime runs): each turn that
coroutine takes is a heap entry here, in the same order, so the two give the same trace
line for line (tests/test_sim_serve.py), and RollPacker's traces stayed byte for byte
what its own coroutines gave (docs/simulated-core.md, "How a group is served").

The turns: the group's requests go out a turn after `serve` is called (a spawned
coroutine's first step); the group wakes a turn after a response arrives and takes every
response then in, lowest sample first; each kept response's check starts a turn after
it is taken; a check's end is seen a turn later; the group's scores are awaited in
sample order, the control node's time per group then passes, and the group is
materialised a turn after that.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from heapq import heappop, heappush
from typing import Any

from harness.core.runtime import Group, Request, Response
from harness.core.serving import AdaptiveTimeout
from harness.sim.checks import Limited, check
from harness.sim.co import Wait


class KeepService(Wait):
    """One group served speculatively; done with the group once it is materialised (or
    complete, without `score`), or with None when the system aborted it first."""

    __slots__ = ("rt", "group", "n", "keep", "priority", "on_complete", "on_response",
                 "score", "timeout", "responses", "arrived", "waiting", "woken", "over",
                 "kept", "rewards", "scored", "parked")

    def __init__(self, rt: Any, group: Group, n: int, keep: int, priority: int,
                 on_complete: Callable[[Group], None] | None,
                 on_response: Callable[[Response], None] | None, score: bool,
                 timeout: AdaptiveTimeout | None) -> None:
        super().__init__()
        self.rt, self.group, self.n, self.keep, self.priority = rt, group, n, keep, priority
        self.on_complete, self.on_response = on_complete, on_response
        self.score, self.timeout = score, timeout
        self.responses: list[Any] = [None] * n
        self.arrived: list[int] = []  # samples back and not yet taken (a heap)
        self.waiting = set(range(n))  # samples not yet taken
        self.woken = self.over = False
        self.kept: list[Response] = []
        self.rewards: list[Any] = []
        self.scored: list[bool] = []
        self.parked = -1  # the score awaited (its index in `kept`) once the group is complete
        rt.heap.call_soon(self._send)

    def _send(self) -> None:
        group, rt = self.group, self.rt
        tokens = rt.config.max_response_tokens
        rt.engine.submit_many([Request(group.round, group.id, sample, group.prompt, tokens,
                                       self.priority) for sample in range(self.n)],
                              self._answered)

    def _answered(self, response: Response) -> None:
        if self.on_response is not None:
            self.on_response(response)
        if self.over:  # complete or stopped: a spare sample's abort, say
            return
        sample = response.request.sample
        self.responses[sample] = response
        heappush(self.arrived, sample)
        if not self.woken:
            self.woken = True
            self.rt.heap.call_soon(self._wake)

    def _wake(self) -> None:
        arrived, kept, heap = self.arrived, self.kept, self.rt.heap
        while len(kept) < self.keep:
            if not arrived:
                self.woken = False
                return
            sample = heappop(arrived)
            self.waiting.discard(sample)
            response = self.responses[sample]
            if response.status != "finished":  # the system aborted the group
                self.over = True
                self.set_result(None)
                return
            kept.append(response)
            if self.score:
                self.rewards.append(None)
                self.scored.append(False)
                heap.call_soon(self._check, response, len(kept) - 1)
        self.over = True
        group, rt = self.group, self.rt
        if self.waiting:  # the spare samples are not needed
            rt.engine.abort_now([f"{group.id}.{s}" for s in sorted(self.waiting)])
        group.responses = kept
        rt.emit("group_complete", group=group.id, round=group.round)
        if self.on_complete is not None:
            self.on_complete(group)
        if not self.score:
            self.set_result(group)
            return
        self.parked = 0
        self._collect()

    def _check(self, response: Response, index: int) -> None:
        wait = check(self.rt, response, self.timeout)
        if isinstance(wait, Limited):  # it resolves on the coroutine's own turn
            wait.add_done_callback(partial(self._scored, index))
        else:
            wait.add_done_callback(partial(self._seen, index))

    def _seen(self, index: int, wait: Wait) -> None:
        self.rt.heap.call_soon(self._scored, index, wait)

    def _scored(self, index: int, wait: Wait) -> None:
        if wait.cancelled():  # the run is over: its coroutines are being reaped
            return
        self.rewards[index] = wait.result()
        self.scored[index] = True
        if index == self.parked:
            self.rt.heap.call_soon(self._collect)

    def _collect(self) -> None:
        """The scores in sample order, as `[await s for s in scores]` takes them."""
        scored, parked = self.scored, self.parked
        while parked < len(scored) and scored[parked]:
            parked += 1
        self.parked = parked
        if parked == len(scored):
            self.rt.after_materialize_delay(self._materialize_due)

    def _materialize_due(self) -> None:
        self.rt.heap.call_soon(self._materialized)

    def _materialized(self) -> None:
        self.group.rewards = self.rewards
        self.rt.materialized(self.group)
        self.set_result(self.group)
