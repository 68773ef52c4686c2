"""Serving a group on the simulator by callbacks: no coroutine per request.

`Runtime.serve` is the call every group-level system makes, once a group; on the live
runtime it is a coroutine over `engine.submit`'s futures (harness/shared/serve.py). Here
the same steps are callbacks on the event heap: each response, as the engine returns
it, is told to `on_response` and starts its check (a timer); the K-th is the group's
completion (`group_complete`, then `on_complete`); the K-th score starts the control
node's time per group, after which the group is materialised and the Wait the system
awaits is done. A request costs a heap entry and a check, not a coroutine and its
turns (docs/simulated-core.md, "How a group is served"). Where nothing can wait for a
check or cut it (the verifier's own `_Check` with no reward workers, no adaptive
timeout for the prompt), the check is that timer alone: its draw, then one heap entry
that ends it, as `_Check` takes them, with no Wait and no callback of its own. On the
compiled pool (`serve_group`) the core runs a plain group's returns and checks itself
(telling `on_response` of each return), and calls `answered_last` at the K-th response
and `all_scored` at the K-th score (a group served with `score=False`: its returns only,
`answered_last` its end); a group with a sample aborted there is handed back to
`_answered` (`core_checked`: harness/sim/fastcore/inflight.py).

A partial group (`resume`: APRIL's carried groups, slime-async's requeued ones) sends
only its samples not done, each on from its partial response; an aborted sample ends
there, and the Wait is done once every sample sent has ended, the group materialised
only when all K are done. `slots` bounds the attempts in flight (slime-async's
semaphore): a sample waiting for one goes a turn after it is free, as a coroutine would.

Within one instant the order differs from the coroutine's (a check starts as its
response arrives, not a turn later); the times and events are the same.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from harness.core.runtime import Gate, Group, PartialGroup, Request, Response
from harness.core.serving import AdaptiveTimeout
from harness.shared.serve import stopped
from harness.sim.checks import check
from harness.sim.co import Wait
from workloads.replay import check_outcome, drawn


class GroupService(Wait):
    """One group under way; done with the group once it is materialised (or, for a
    partial group stopped by an abort, once every sample sent has ended)."""

    __slots__ = ("rt", "group", "on_complete", "on_response", "retry", "gate", "responses",
                 "rewards", "unanswered", "left", "score", "timeout", "resume", "slots",
                 "materialize", "checked", "timers", "draws")

    def __init__(self, rt: Any, group: Group, n: int, priority: int,
                 on_complete: Callable[[Group], None] | None,
                 on_response: Callable[[Response], None] | None, retry: bool,
                 gate: Gate | None = None, score: bool = True,
                 timeout: AdaptiveTimeout | None = None, resume: PartialGroup | None = None,
                 slots: Any = None, materialize: bool = True) -> None:
        super().__init__()
        self.rt, self.group, self.retry, self.gate = rt, group, retry, gate
        self.on_complete, self.on_response = on_complete, on_response
        self.score, self.timeout = score, timeout
        self.resume, self.slots, self.materialize = resume, slots, materialize
        self.checked: list[int] = []  # a partial group's samples checked by this call
        # (the compiled pool's `serve_group`): its K samples' draws, for `all_scored`
        self.draws: list[tuple[int, float, float]] | None = None
        self.timers = score and getattr(rt.verifier, "timers", False)  # a check: a timer
        k = n
        self.responses: list[Any] = [None] * k
        self.rewards: list[Any] = [None] * k
        tokens = rt.config.max_response_tokens
        if slots is None and resume is None and (gate is None or gate.open.is_set()):
            # a plain group, or one whose gate is open (AReaL's): the K at once
            self.unanswered = self.left = k  # finished responses / samples to end
            rnd, gid, prompt = group.round, group.id, group.prompt
            requests = [Request(rnd, gid, sample, prompt, tokens, priority)
                        for sample in range(k)]
            if gate is not None:  # each known to it as in flight, in order (`_send`)
                requests = [gate.sending(request) for request in requests]
            serve_group = getattr(rt.engine, "serve_group", None)
            if (serve_group is not None and (not score or (self.timers and timeout is None
                                                           and materialize))
                    and k <= len(getattr(prompt.hidden, "lengths", ()))):
                serve_group(requests, self, score)  # the compiled pool runs the returns
            else:  # one call into the compiled pool's core
                rt.engine.submit_many(requests, self._answered)
            return
        todo: Any = range(k)
        if resume is not None:
            for sample, (response, reward) in resume.done.items():
                self.responses[sample], self.rewards[sample] = response, reward
            todo = [s for s in todo if s not in resume.done]
        self.unanswered = self.left = len(todo)
        if slots is not None:
            send: Callable[..., None] = self._acquire
        else:
            send = rt.engine.submit_then if gate is None else self._send
        for sample in todo:
            send(Request(group.round, group.id, sample, group.prompt, tokens, priority,
                         None if resume is None else resume.partial.pop(sample, None)),
                 self._answered)
        if not todo:  # a partial group done before: complete, and materialised, now
            self._complete()
            self.left = 1
            self._ended()

    def _acquire(self, request: Request, _: Any = None) -> None:
        """Take a slot, then send; one that waits goes a turn after it is free."""
        assert self.slots is not None
        taken = self.slots.acquire()
        if taken.done():
            self._send(request)
            return
        call_soon = self.rt.heap.call_soon
        taken.add_done_callback(lambda _w: call_soon(self._send, request))

    def _send(self, request: Request, _: Any = None) -> None:
        """Through the gate, if any: once it is open, as it says (its round), and known to
        it. Held, it goes a turn after the gate opens, as a coroutine waiting on it would:
        the system that opened it runs on first (AReaL closes its round, so a sample
        resumed after the round's last update is the next round's work)."""
        gate = self.gate
        if gate is None:
            self.rt.engine.submit_then(request, self._answered)
            return
        if not gate.open.is_set():
            call_soon = self.rt.heap.call_soon
            gate.open.wait().add_done_callback(lambda _w: call_soon(self._send, request))
            return
        self.rt.engine.submit_then(gate.sending(request), self._answered)

    def _answered(self, response: Response) -> None:
        request = response.request
        if self.gate is not None:
            self.gate.returned(request.id)
        if self.slots is not None:
            self.slots.release()
        if self.on_response is not None:
            self.on_response(response)
        if response.status == "aborted":
            if self.retry:  # on from its tokens
                again = request.continued(response)
                if self.slots is not None:
                    self._acquire(again)
                elif self.gate is None:
                    self.rt.engine.submit_then(again, self._answered)
                else:
                    self._send(again)
                return
            if self.resume is not None:  # the sample stops here, its tokens kept
                if response.tokens > 0:
                    self.resume.partial[request.sample] = response
                self._ended()
                return
        self.responses[request.sample] = response
        if self.timers and (self.timeout is None
                            or not self.timeout.applies(request.prompt)):
            took, reward = check_outcome(response, None)  # `_Check`'s draw, then its timer
            self.rt.heap.call_later(took, self._checked, response, took, reward)
        elif self.score:
            check(self.rt, response, self.timeout).add_done_callback(
                partial(self._scored, request.sample))
        self.unanswered -= 1
        if self.unanswered == 0:  # every sample finished (a partial group's done ones too)
            self._complete()

    def _complete(self) -> None:
        group = self.group
        group.responses = self.responses
        self.rt.emit("group_complete", group=group.id, round=group.round)
        if self.on_complete is not None:
            self.on_complete(group)
        if not self.score:
            self.set_result(group)

    def answered_last(self, response: Response) -> None:
        """The K-th response of a group whose returns and checks the compiled pool runs
        (`serve_group`): its check is under way there; the others are in `responses`."""
        self.responses[response.request.sample] = response
        self.core_returned()

    def core_returned(self) -> None:
        """The group complete, its K responses in `responses`: at its K-th return
        (`answered_last`), or, where the core took that return too (a silent group:
        harness/sim/fastcore/served.py), at its last check, just before `all_scored`."""
        self.unanswered = 0
        self._complete()

    def all_scored(self) -> None:
        """The compiled pool's K-th check has ended: each check's time and reward as
        `_Check` sets them (the same draw), then the group ends as any other."""
        _outcomes(self.group.prompt.hidden, self.responses, self.rewards,
                  range(len(self.responses)), self.draws)
        self.left = 1
        self._ended()

    def core_checked(self, samples: list[int]) -> None:
        """The compiled pool handed this group back after an abort (harness/sim/fastcore/
        inflight.py): its checks of `samples` (the responses it held) are over, the
        others are this service's own; each as `_Check` sets it, then `_ended` for each."""
        _outcomes(self.group.prompt.hidden, self.responses, self.rewards, samples)
        self.left -= len(samples) - 1
        self._ended()

    def _checked(self, response: Response, took: float, reward: float) -> None:
        """`_Check._done` then `_scored`, for a check that is its timer alone."""
        response.verify_s = took
        self._rewarded(response.request.sample, reward)

    def _scored(self, sample: int, check: Wait) -> None:
        if check.cancelled():  # the run is over: its coroutines are being reaped
            return
        self._rewarded(sample, check.result())

    def _rewarded(self, sample: int, reward: float) -> None:
        self.rewards[sample] = reward
        if self.resume is not None:
            self.resume.done[sample] = (self.responses[sample], reward)
            self.checked.append(sample)
        self._ended()

    def _ended(self) -> None:
        """A sample sent has ended (scored, or stopped); after the last, the group is
        materialised when all K are done, else (stopped) handed back as it is."""
        self.left -= 1
        if self.left:
            return
        if None in self.rewards:  # stopped by an abort: `resume` holds what it got
            assert self.resume is not None  # only a partial group's samples stop
            stopped(self.rt, self.resume, self.checked)
            self.set_result(self.group)
        elif self.materialize:
            self.rt.after_materialize_delay(self._materialized)
        else:
            self.group.rewards = self.rewards
            self.set_result(self.group)

    def _materialized(self) -> None:
        self.group.rewards = self.rewards
        self.rt.materialized(self.group)
        self.set_result(self.group)


def _outcomes(hidden: Any, responses: list[Any], rewards: list[Any],
              samples: Iterable[int], draws: list[tuple[int, float, float]] | None = None
              ) -> None:
    """`check_outcome(response, None)` of each of `samples` (their responses and the
    draws of the group's prompt, `hidden`), its time on the response and its reward in
    `rewards`: a group's K at once (`drawn`), not a call and a tuple each. `draws`: the
    group's K drawn already (`serve_group`'s), where `samples` are all K."""
    samples = list(samples)
    rows = draws if draws is not None else drawn(hidden, samples)
    for sample, (_, reward, took) in zip(samples, rows, strict=True):
        response = responses[sample]
        response.verify_s = took
        rewards[sample] = (reward if response.status == "finished" and not response.truncated
                           else 0.0)
