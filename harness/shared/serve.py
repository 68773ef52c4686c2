"""Serving a group, for both runtimes: the one call every group-level system makes.

`Runtime.serve` is here once, on the runtime's own calls (`engine.submit`'s handles,
`spawn`, `verifier.score`, `materialize`), so a system asks for a whole group and
never waits on each request itself. The simulated core may later serve a group by
callbacks on its event heap (docs/architecture.md, "The simulated core (#36)"); this
version is the reference that trace for trace it must match.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.core.runtime import (
    Gate,
    Group,
    Handle,
    PartialGroup,
    Request,
    Response,
    Runtime,
    Slots,
)


def stopped(rt: Runtime, work: PartialGroup, checked: list[int]) -> None:
    """A partial group an abort stopped: the check times of the samples this call
    checked go into the trace (`decision` `group_stopped`), since no `group_materialized`
    may ever carry them, and a replay of the trace (`--workload trace:`) waits them
    again: where such a group goes back in APRIL's buffer is set by when they end."""
    if checked:
        group, samples = work.group, sorted(checked)
        rt.emit("decision", what="group_stopped", group=group.id, round=group.round,
                samples=samples, verify_s=[work.done[s][0].verify_s for s in samples])


async def _score(rt: Runtime, pending: Handle[Response], partial: bool = False
                 ) -> float | None:
    """The sample's reward once it ends; None for one a partial group's abort stopped."""
    response: Response = await pending
    if partial and response.status == "aborted":
        return None
    return await rt.verifier.score(response)


async def _attempt(rt: Runtime, request: Request, gate: Gate | None) -> Response:
    """One attempt; through the gate (once it is open, known to it while in the engine)."""
    if gate is None:
        return await rt.engine.submit(request)
    await gate.open.wait()
    request = gate.sending(request)
    try:
        return await rt.engine.submit(request)
    finally:
        gate.returned(request.id)


async def _sample(rt: Runtime, request: Request,
                  on_response: Callable[[Response], None] | None,
                  gate: Gate | None = None, slots: Slots | None = None,
                  retry: bool = True) -> Response:
    """One sample to its end: with `retry`, each time a sync aborts it, sent again with
    its tokens; each attempt holding one of the `slots`, if any."""
    while True:
        if slots is None:
            response = await _attempt(rt, request, gate)
        else:
            async with slots:
                response = await _attempt(rt, request, gate)
        if on_response is not None:
            on_response(response)
        if response.status != "aborted" or not retry:
            return response
        request = response.request.continued(response)


async def serve(
    rt: Runtime,
    group: Group,
    priority: int = 0,
    on_complete: Callable[[Group], None] | None = None,
    on_response: Callable[[Response], None] | None = None,
    retry: bool = False,
    gate: Gate | None = None,
    resume: PartialGroup | None = None,
    slots: Slots | None = None,
    materialize: bool = True,
) -> Group:
    """Generate the group's K samples, score each as it finishes (asynchronous
    rewards), and materialise the group once all K are scored. `on_response`
    is told as each response leaves the engine, `on_complete` when all K have;
    `retry`: an aborted sample is sent again with its tokens; `gate`: every attempt
    waits for it to be open, and it is told what is in the engine (`Gate`); `resume`:
    a partial group, its samples not done sent on from their partial responses, what
    they end as left in it (complete and materialised only when all K are done);
    `slots`: each attempt holds one; `materialize=False`: the caller materialises."""
    cfg = rt.config
    if gate is not None and not retry and resume is None:
        raise ValueError("serve: a gate aborts samples, so it needs retry=True or resume=")
    todo = [s for s in range(cfg.group_size) if resume is None or s not in resume.done]
    requests = [Request(group.round, group.id, s, group.prompt, cfg.max_response_tokens,
                        priority, None if resume is None else resume.partial.pop(s, None))
                for s in todo]
    pending: list[Any]
    if retry or gate is not None or slots is not None:
        pending = [rt.spawn(_sample(rt, r, on_response, gate, slots, retry)) for r in requests]
    else:
        pending = [rt.engine.submit(r) for r in requests]
        if on_response is not None:
            tell: Callable[[Any], object] = lambda f: on_response(f.result())  # noqa: E731
            for handle in pending:
                handle.add_done_callback(tell)
    scores = [rt.spawn(_score(rt, h, resume is not None)) for h in pending]
    answered: list[Response] = [await h for h in pending]
    if resume is None:
        responses = answered
    else:
        got = dict(zip(todo, answered, strict=True))
        responses = [resume.done[s][0] if s in resume.done else got[s]
                     for s in range(cfg.group_size)]
    complete = all(r.status != "aborted" for r in answered) or resume is None
    if complete:
        group.responses = responses
        rt.emit("group_complete", group=group.id, round=group.round)
        if on_complete is not None:
            on_complete(group)
    rewards = [await s for s in scores]
    if resume is not None:
        for s, response, reward in zip(todo, answered, rewards, strict=True):
            if reward is None:
                if response.tokens > 0:
                    resume.partial[s] = response
            else:
                resume.done[s] = (response, reward)
        if not complete:
            stopped(rt, resume, [s for s, w in zip(todo, rewards, strict=True)
                                 if w is not None])
            return group
        rewards = [resume.done[s][1] for s in range(cfg.group_size)]
    group.rewards = rewards  # type: ignore[assignment]
    if materialize:
        await rt.materialize(group)
    return group
