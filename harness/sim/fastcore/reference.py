"""The Python twin of `fastcore.simulate`: the same stream through `SimEngine` on the
simulator's heap (harness/sim/heap.py), its emitted events collected as the same columns.

Every submission is scheduled on the heap before the run starts, in (time, index) order,
one `SimEngine` per replica; so at equal times a submission comes before an engine's own
timer, which is the order the compiled core keeps. `closed_loop` submits from the
responses' returns instead, on `SimEngine`s or on the compiled core stepped on the heap.
Also the streams the tests and the measurement draw (`random_stream`): seeded, with
bursts of equal times (a group's K samples submitted at once) and priorities.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from harness.core.runtime import Prompt, Request
from harness.sim.engine import SimEngine
from harness.sim.fastcore import KINDS, Events, Stream
from harness.sim.heap import Heap
from harness.sim.perf import DecodeModel, TableDecodeModel

_CODE = {kind: code for code, kind in enumerate(KINDS)}


class Collector:
    """An engine's `emit`: each event's columns appended, on the heap's clock."""

    def __init__(self, heap: Heap) -> None:
        self.heap = heap
        self.t: list[float] = []
        self.kind: list[int] = []
        self.request: list[int] = []
        self.engine: list[int] = []
        self.value: list[int] = []
        self.engine_of: list[int] = []  # request -> engine (preempt and finish name none)

    def __call__(self, kind: str, group: int, engine: int = -1, prompt_tokens: int = 0,
                 response_tokens: int = 0, **_: object) -> None:
        self.t.append(self.heap.now)
        self.kind.append(_CODE[kind])
        self.request.append(group)
        self.engine.append(self.engine_of[group])
        self.value.append(prompt_tokens if kind == "request_submit" else response_tokens)

    def events(self, preemptions: int) -> Events:
        return Events(np.array(self.t), np.array(self.kind), np.array(self.request),
                      np.array(self.engine), np.array(self.value), preemptions)


def requests(stream: Stream) -> list[Request]:
    """The stream's requests: request i is group i, sample 0 (its id "i.0")."""
    return [Request(0, i, 0, Prompt(i, p), max_tokens=t, priority=q)
            for i, (p, t, q) in enumerate(zip(stream.prompt.tolist(), stream.target.tolist(),
                                              stream.priority.tolist(), strict=True))]


def prepare(stream: Stream, decode: DecodeModel, kv_capacity_tokens: int,
            max_running: int) -> tuple[Heap, list[SimEngine], Collector]:
    """The heap with every submission scheduled, ready to `run()`."""
    heap = Heap()
    out = Collector(heap)
    out.engine_of = stream.engine.tolist()
    targets = stream.target.tolist()
    engines = [SimEngine(heap, decode, kv_capacity_tokens, max_running, out,
                         lambda r: targets[r.group], index=e) for e in range(stream.engines)]
    reqs = requests(stream)
    times = stream.submit_t.tolist()
    for i in sorted(range(len(reqs)), key=lambda i: (times[i], i)):
        heap.call_at(times[i], engines[out.engine_of[i]].submit_then, reqs[i], _ignore,
                     f"{i}.0")
    return heap, engines, out


def run_python(stream: Stream, decode: DecodeModel, kv_capacity_tokens: int,
               max_running: int) -> Events:
    heap, engines, out = prepare(stream, decode, kv_capacity_tokens, max_running)
    heap.run()
    return out.events(sum(e.preemptions for e in engines))


def _ignore(_: object) -> None:
    """A response's callback: the events say all a comparison needs."""


def random_stream(seed: int, n: int, engines: int, *, rate: float = 50.0, group: int = 8,
                  prompt: tuple[int, int] = (16, 1024), target: tuple[int, int] = (1, 2048),
                  priorities: int = 1) -> Stream:
    """n requests in groups of `group` submitted at once (a group's samples), groups
    arriving as a Poisson process of `rate` a second, each group on one random engine;
    prompt and target tokens uniform in the ranges; priorities uniform in [0, priorities)."""
    rng = np.random.default_rng(seed)
    groups = -(-n // group)
    starts = np.cumsum(rng.exponential(1.0 / rate, groups))
    submit_t = np.repeat(starts, group)[:n]
    return Stream(submit_t, rng.integers(0, priorities, n),
                  np.repeat(rng.integers(prompt[0], prompt[1] + 1, groups), group)[:n],
                  rng.integers(target[0], target[1] + 1, n),
                  np.repeat(rng.integers(0, engines, groups), group)[:n], engines)


def closed_loop(stream: Stream, roots: int, decode: DecodeModel | TableDecodeModel,
                kv_capacity_tokens: int, max_running: int, compiled: bool,
                room: int = 64) -> Events:
    """A system's feedback on either engine: requests 0..roots-1 are submitted at their
    times; when request i's response returns (a turn after it ends, as the pool returns
    it), request i + roots is submitted at once, to its own replica. `compiled`: the
    replicas are `SteppedEngines` on the heap (`room`: its arrays' first size), else
    `SimEngine`s. Events in emission order, each request by its index in `stream`."""
    from harness.sim.fastcore.stepped import SteppedEngines  # numba only when asked

    heap, n = Heap(), len(stream.submit_t)
    engine_of, prio = stream.engine.tolist(), stream.priority.tolist()
    prompt, target = stream.prompt.tolist(), stream.target.tolist()
    submit: Callable[[int], None]
    if compiled:
        order: list[int] = []  # the core's index -> the stream's

        def returned(k: int) -> None:
            if order[k] + roots < n:
                submit(order[k] + roots)

        core = SteppedEngines(heap, decode, kv_capacity_tokens, max_running, stream.engines,
                              returned, room)

        def submit(i: int) -> None:
            order.append(i)
            core.submit(engine_of[i], prio[i], prompt[i], target[i])
    else:
        out = Collector(heap)
        out.engine_of = engine_of
        engines = [SimEngine(heap, decode, kv_capacity_tokens, max_running, out,
                             lambda r: target[r.group], index=e) for e in range(stream.engines)]
        reqs = requests(stream)

        def back(i: int, _: object) -> None:
            if i + roots < n:
                submit(i + roots)

        def submit(i: int) -> None:
            engines[engine_of[i]].submit_then(reqs[i], partial(heap.call_soon, back, i),
                                              f"{i}.0")
    times = stream.submit_t.tolist()
    for i in sorted(range(min(roots, n)), key=lambda i: (times[i], i)):
        heap.call_at(times[i], submit, i)
    heap.run()
    if not compiled:
        return out.events(sum(e.preemptions for e in engines))
    ev = core.events()
    return Events(ev.t, ev.kind, np.array(order)[ev.request], ev.engine, ev.value,
                  ev.preemptions)
