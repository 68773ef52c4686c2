"""The simulator's engines compiled (issue #36, item 4): the first step.

`simulate` runs a stream of requests, each already routed to one of a pool's replicas,
through a numba-compiled copy of `SimEngine`'s continuous batching (harness/sim/batching.py,
harness/sim/engine.py) priced by the roofline (`DecodeModel`) or the measured kernels
(`TableDecodeModel`), and returns the events as columns. They are the events `SimEngine`
emits for the same stream, at the same times bit for bit (`reference.run_python` is that
Python twin; tests/test_fastcore.py compares them).

Scope: what can be made exactly equal today. Submissions only: no abort, pause, weight
install, chunk, resumed request, GPU share, lent replica, speculative decoding or eager
step; each of those stays on the Python path. `stepped.SteppedEngines` runs the same
rules on the simulator's heap, requests submitted from callbacks; `SimRuntime` uses
them through `pool.CorePool` for the runs `choice` allows (docs/simulated-core.md, "The
compiled core").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.sim.perf import DecodeModel, TableDecodeModel

KINDS = ("request_submit", "request_admit", "request_preempt", "request_finish")


@dataclass(frozen=True)
class Stream:
    """Requests as columns: when each is submitted, its priority (lower first), prompt
    tokens, tokens it will generate (its target) and the replica it is routed to."""

    submit_t: np.ndarray  # float64 seconds, >= 0
    priority: np.ndarray  # int64
    prompt: np.ndarray  # int64, >= 0
    target: np.ndarray  # int64, >= 1
    engine: np.ndarray  # int64, in [0, engines)
    engines: int

    def __post_init__(self) -> None:
        n = len(self.submit_t)
        for name in ("priority", "prompt", "target", "engine"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"stream: {name} has {len(getattr(self, name))} entries, "
                                 f"submit_t {n}")
        if n and not (np.isfinite(self.submit_t).all() and self.submit_t.min() >= 0):
            raise ValueError("stream: submit_t must be finite and >= 0")
        if n and self.target.min() < 1:
            raise ValueError("stream: target must be >= 1 (nothing left to generate)")
        if n and self.prompt.min() < 0:
            raise ValueError("stream: prompt must be >= 0")
        if n and (self.engine.min() < 0 or self.engine.max() >= self.engines):
            raise ValueError(f"stream: engine must be in [0, {self.engines})")


@dataclass(frozen=True)
class Events:
    """Events as columns, each engine's in emission order: time, kind (an index into
    `KINDS`), request (its index in the stream), engine, value (submit: prompt tokens;
    finish: response tokens; else 0)."""

    t: np.ndarray
    kind: np.ndarray
    request: np.ndarray
    engine: np.ndarray
    value: np.ndarray
    preemptions: int

    def rows(self) -> list[tuple[float, int, int, int, int]]:
        """(t, kind, request, engine, value), sorted: what a comparison reads."""
        return sorted(zip(self.t.tolist(), self.kind.tolist(), self.request.tolist(),
                          self.engine.tolist(), self.value.tolist(), strict=True))


def simulate(stream: Stream, decode: DecodeModel | TableDecodeModel, kv_capacity_tokens: int,
             max_running: int) -> Events:
    """Run `stream` on `stream.engines` replicas of one engine priced by `decode`."""
    # numba only when a run asks: importing it loads llvmlite, whose `binding.ffi.lib`
    # answers every attribute (`__dict__` too) with a C-function wrapper, and vLLM 0.32's
    # in-process start, which reads `vars()` of every module attribute
    # (vllm/triton_utils/dispatcher.py:139), fails in a process that holds it
    from harness.sim.fastcore.stepmodel import step_params
    from harness.sim.fastcore.timeline import PRIO, PROMPT, TARGET, run_engines

    n = len(stream.submit_t)
    submit_t = np.ascontiguousarray(stream.submit_t, dtype=np.float64)
    engine = np.asarray(stream.engine, dtype=np.int64)
    rq = np.zeros((n, 9), dtype=np.int64)
    rq[:, PRIO] = stream.priority
    rq[:, PROMPT] = stream.prompt
    rq[:, TARGET] = stream.target
    order = np.lexsort((submit_t, engine)).astype(np.int64)  # stable: ties by index
    bounds = np.searchsorted(engine[order], np.arange(stream.engines + 1)).astype(np.int64)
    most = int(np.diff(bounds).max()) if n else 1  # no replica runs a larger batch
    params = step_params(decode, max(1, min(int(max_running), most)))
    ev_t, ev, preemptions = run_engines(params, int(kv_capacity_tokens), int(max_running),
                                        submit_t, rq, order, bounds)
    return Events(ev_t, ev[:, 0].copy(), ev[:, 1].copy(), ev[:, 2].copy(), ev[:, 3].copy(),
                  int(preemptions))
