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

from harness.core.runtime import Gate, Group, Handle, Request, Response, Runtime


async def _score(rt: Runtime, pending: Handle[Response]) -> float:
    response: Response = await pending
    return await rt.verifier.score(response)


async def _sample(rt: Runtime, request: Request,
                  on_response: Callable[[Response], None] | None,
                  gate: Gate | None = None) -> Response:
    """One sample to its end: each time a sync aborts it, sent again with its tokens
    (through the gate, when there is one: once it is open)."""
    while True:
        if gate is None:
            response: Response = await rt.engine.submit(request)
        else:
            await gate.open.wait()
            request = gate.sending(request)
            try:
                response = await rt.engine.submit(request)
            finally:
                gate.returned(request.id)
        if on_response is not None:
            on_response(response)
        if response.status != "aborted":
            return response
        request = request.continued(response)


async def serve(
    rt: Runtime,
    group: Group,
    priority: int = 0,
    on_complete: Callable[[Group], None] | None = None,
    on_response: Callable[[Response], None] | None = None,
    retry: bool = False,
    gate: Gate | None = None,
) -> Group:
    """Generate the group's K samples, score each as it finishes (asynchronous
    rewards), and materialise the group once all K are scored. `on_response`
    is told as each response leaves the engine, `on_complete` when all K have;
    `retry`: an aborted sample is sent again with its tokens; `gate`: every attempt
    waits for it to be open, and it is told what is in the engine (`Gate`)."""
    cfg = rt.config
    requests = [Request(group.round, group.id, s, group.prompt, cfg.max_response_tokens,
                        priority) for s in range(cfg.group_size)]
    pending: list[Any]
    if gate is not None and not retry:
        raise ValueError("serve: a gate holds samples sent again, so it needs retry=True")
    if retry:
        pending = [rt.spawn(_sample(rt, r, on_response, gate)) for r in requests]
    else:
        pending = [rt.engine.submit(r) for r in requests]
        if on_response is not None:
            tell: Callable[[Any], object] = lambda f: on_response(f.result())  # noqa: E731
            for handle in pending:
                handle.add_done_callback(tell)
    scores = [rt.spawn(_score(rt, h)) for h in pending]
    group.responses = [await h for h in pending]
    rt.emit("group_complete", group=group.id, round=group.round)
    if on_complete is not None:
        on_complete(group)
    group.rewards = [await s for s in scores]
    await rt.materialize(group)
    return group
