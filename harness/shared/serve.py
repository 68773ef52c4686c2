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

from harness.core.runtime import (
    Event,
    Gate,
    Group,
    Handle,
    PartialGroup,
    Request,
    Response,
    Runtime,
    Slots,
)
from harness.core.serving import AdaptiveTimeout, serve_samples


def stopped(rt: Runtime, work: PartialGroup, checked: list[int]) -> None:
    """A partial group an abort stopped: the check times of the samples this call
    checked go into the trace (`decision` `group_stopped`), since no `group_materialized`
    may ever carry them, and a replay of the trace (`--workload trace:`) waits them
    again: where such a group goes back in APRIL's buffer is set by when they end."""
    if checked:
        group, samples = work.group, sorted(checked)
        rt.emit("decision", what="group_stopped", group=group.id, round=group.round,
                samples=samples, verify_s=[work.done[s][0].verify_s for s in samples])


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


async def _score(rt: Runtime, pending: Handle[Response], timeout: AdaptiveTimeout | None,
                 partial: bool = False) -> float | None:
    """The sample's reward once it ends; None for one a partial group's abort stopped."""
    response: Response = await pending
    if partial and response.status == "aborted":
        return None
    return await check(rt, response, timeout)


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
    resume: PartialGroup | None = None,
    slots: Slots | None = None,
    materialize: bool = True,
) -> Group | None:
    """Generate the group's samples, score each as it finishes (asynchronous
    rewards), and materialise the group once all are scored (`Runtime.serve` says
    what each argument means). `resume`: a partial group, its samples not done sent on
    from their partial responses, what they end as left in it (complete and
    materialised only when all are done); `slots`: each attempt holds one."""
    n = serve_samples(rt.config.group_size, n, keep, retry, gate, resume, slots, score)
    if keep:
        return await _serve_first(rt, group, n, keep, priority, on_complete, on_response,
                                  score, timeout)
    cfg = rt.config
    todo = [s for s in range(n) if resume is None or s not in resume.done]
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
    partial = resume is not None
    scores = [rt.spawn(_score(rt, h, timeout, partial)) for h in pending] if score else []
    answered: list[Response] = [await h for h in pending]
    if resume is None:
        responses = answered
    else:
        got = dict(zip(todo, answered, strict=True))
        responses = [resume.done[s][0] if s in resume.done else got[s] for s in range(n)]
    complete = resume is None or all(r.status != "aborted" for r in answered)
    if complete:
        group.responses = responses
        rt.emit("group_complete", group=group.id, round=group.round)
        if on_complete is not None:
            on_complete(group)
    if not score:
        return group
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
        rewards = [resume.done[s][1] for s in range(n)]
    group.rewards = rewards  # type: ignore[assignment]
    if materialize:
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
