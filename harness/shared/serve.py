"""Serving a group, for both runtimes: the one call every group-level system makes.

`Runtime.serve` is here once, on the runtime's own calls (`engine.submit`'s handles,
`spawn`, `verifier.score`, `materialize`), so a system asks for a whole group and
never waits on each request itself. The simulator serves a group by callbacks on its
event heap (harness/sim/serve.py, harness/sim/serve_keep.py); this version is the
reference that it must match, and what the live runtime runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.core.runtime import Event, Gate, Group, Handle, Request, Response, Runtime
from harness.core.serving import AdaptiveTimeout, serve_samples


async def check(rt: Runtime, response: Response, timeout: AdaptiveTimeout | None) -> float:
    """The response's reward. A check `timeout` applies to is started with its `t_max`
    and cancelled (0, a `sandbox_timeout` decision) once it has run past the prompt's
    limit, re-read each time a correct check of the same prompt raises the anchor."""
    prompt = response.request.prompt
    if timeout is None or not timeout.applies(prompt):
        return await rt.verifier.score(response)
    start = rt.now()
    running = rt.spawn(rt.verifier.score(response, timeout=timeout.t_max))
    changed = timeout.changed.setdefault(prompt.index, rt.event())
    while not running.done():
        limit = timeout.limit(prompt.index)
        remaining = start + limit - rt.now()
        if remaining <= 0:
            running.cancel()
            rt.emit("decision", what="sandbox_timeout", group=response.request.group,
                    sample=response.request.sample, limit=round(limit, 3))
            return 0.0
        changed.clear()
        wake = rt.spawn(changed.wait())
        await rt.first([running, wake], remaining)
        wake.cancel()
    reward: float = running.result()
    if reward > 0:
        timeout.correct(prompt.index, rt.now() - start)
    return reward


async def _score(rt: Runtime, pending: Handle[Response],
                 timeout: AdaptiveTimeout | None) -> float:
    response: Response = await pending
    return await check(rt, response, timeout)


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
    *,
    n: int = 0,
    keep: int = 0,
    priority: int = 0,
    on_complete: Callable[[Group], None] | None = None,
    on_response: Callable[[Response], None] | None = None,
    retry: bool = False,
    gate: Gate | None = None,
    score: bool = True,
    timeout: AdaptiveTimeout | None = None,
) -> Group | None:
    """Generate the group's samples, score each as it finishes (asynchronous
    rewards), and materialise the group once all are scored (`Runtime.serve` says
    what each argument means)."""
    n = serve_samples(rt.config.group_size, n, keep, retry, gate)
    if keep:
        return await _serve_first(rt, group, n, keep, priority, on_complete, on_response,
                                  score, timeout)
    cfg = rt.config
    requests = [Request(group.round, group.id, s, group.prompt, cfg.max_response_tokens,
                        priority) for s in range(n)]
    pending: list[Any]
    if retry:
        pending = [rt.spawn(_sample(rt, r, on_response, gate)) for r in requests]
    else:
        pending = [rt.engine.submit(r) for r in requests]
        if on_response is not None:
            tell: Callable[[Any], object] = lambda f: on_response(f.result())  # noqa: E731
            for handle in pending:
                handle.add_done_callback(tell)
    scores = [rt.spawn(_score(rt, h, timeout)) for h in pending] if score else []
    group.responses = [await h for h in pending]
    rt.emit("group_complete", group=group.id, round=group.round)
    if on_complete is not None:
        on_complete(group)
    if score:
        group.rewards = [await s for s in scores]
        await rt.materialize(group)
    return group


async def _serve_first(rt: Runtime, group: Group, n: int, keep: int, priority: int,
                       on_complete: Callable[[Group], None] | None,
                       on_response: Callable[[Response], None] | None, score: bool,
                       timeout: AdaptiveTimeout | None) -> Group | None:
    """`serve(keep=...)`: the first `keep` of `n` samples to finish are the group, the
    rest are aborted once they are; a sample that comes back aborted before then (the
    system cut the group) stops it: None, nothing scored. On ties the lowest sample
    first. Each kept response's check starts as it is taken."""
    futures = [rt.engine.submit(Request(group.round, group.id, s, group.prompt,
                                        rt.config.max_response_tokens, priority))
               for s in range(n)]
    done: list[Response] = []
    scores: list[Handle[float]] = []
    waiting = set(range(n))
    any_finished = rt.event()

    def arrived(future: Any) -> None:
        if on_response is not None:
            on_response(future.result())
        any_finished.set()

    for future in futures:
        future.add_done_callback(arrived)
    while len(done) < keep:
        finished = await _first(futures, waiting, any_finished)
        waiting.discard(finished)
        response = futures[finished].result()
        if response.status != "finished":
            return None  # the system aborted the group
        done.append(response)
        if score:
            scores.append(rt.spawn(check(rt, response, timeout)))
    if waiting:  # the spare samples are not needed
        await rt.engine.abort([f"{group.id}.{s}" for s in sorted(waiting)])
    group.responses = done
    rt.emit("group_complete", group=group.id, round=group.round)
    if on_complete is not None:
        on_complete(group)
    if score:
        group.rewards = [await s for s in scores]
        await rt.materialize(group)
    return group


async def _first(futures: list[Handle[Response]], waiting: set[int],
                 any_finished: Event) -> int:
    """The index of the first of the waiting futures to finish (lowest index on ties).
    `any_finished` is set by each future as it finishes: one callback per response,
    where a `rt.first` per response would add and remove one on every pending
    future (a group of n responses would cost n squared)."""
    while True:
        for i in sorted(waiting):
            if futures[i].done():
                return i
        any_finished.clear()
        await any_finished.wait()
