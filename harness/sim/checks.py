"""A served response's check on the simulator, by callbacks: `serve(timeout=...)`'s rule.

The step for step twin of `harness.shared.serve.check` (the live runtime's coroutine):
the same calls in the same order, each turn of the coroutine a heap entry, so the two
give the same trace line for line (tests/test_sim_serve.py). A check costs a timer and
a Wait, not a coroutine.
"""

from __future__ import annotations

from typing import Any

from harness.core.runtime import Response
from harness.core.serving import AdaptiveTimeout
from harness.sim.co import Wait


def check(rt: Any, response: Response, timeout: AdaptiveTimeout | None) -> Wait:
    """A Wait for the response's reward: the verifier's own, or one the adaptive
    timeout cuts (`Limited`)."""
    if timeout is None or not timeout.applies(response.request.prompt):
        return rt.verifier.score(response)  # type: ignore[no-any-return]
    return Limited(rt, response, timeout)


class Limited(Wait):
    """A check under an adaptive timeout. It resolves where the coroutine would return:
    a turn after the verifier's check (or the limit's timer, or a raised anchor) ends
    its wait, so a caller that counts turns needs none of its own here."""

    __slots__ = ("rt", "response", "rule", "start", "running", "changed", "wake")

    def __init__(self, rt: Any, response: Response, rule: AdaptiveTimeout) -> None:
        super().__init__()
        self.rt, self.response, self.rule = rt, response, rule
        self.start = rt.heap.now
        self.running: Wait = rt.verifier.score(response, timeout=rule.t_max)
        index = response.request.prompt.index
        self.changed = rule.changed.setdefault(index, rt.event())
        self.wake: Wait | None = None
        self._loop()

    def _loop(self) -> None:
        rt, running = self.rt, self.running
        index = self.response.request.prompt.index
        while not running.done():
            limit = self.rule.limit(index)
            remaining = self.start + limit - rt.heap.now
            if remaining <= 0:
                running.cancel()
                request = self.response.request
                rt.emit("decision", what="sandbox_timeout", group=request.group,
                        sample=request.sample, limit=round(limit, 3))
                self.set_result(0.0)
                return
            self.changed.clear()
            wake = self.changed.wait()
            woken = rt.first([running, wake], remaining)
            if not woken.done():  # the coroutine parks here: on a turn after it is done
                self.wake = wake
                woken.add_done_callback(self._woken)
                return
            wake.cancel()
        reward = running.result()
        if reward > 0:
            self.rule.correct(index, rt.heap.now - self.start)
        self.set_result(reward)

    def _woken(self, _: Wait) -> None:
        self.rt.heap.call_soon(self._resume)

    def _resume(self) -> None:
        if self.done():  # the run is over: it was cancelled meanwhile
            return
        wake, self.wake = self.wake, None
        assert wake is not None
        wake.cancel()
        self._loop()
