"""A request's events as the compiled pool (harness/sim/fastcore/pool.py) hands them to
the trace writer (`BufferedTraceWriter.record_many`): msgspec Structs, not dicts.

Why: the pool makes about six of these a request (its submit, admits, preempts, finish),
and a Struct is made, encoded and let go for less than the dict `record` builds: in
RolloutPipe's grid (98,304 requests, 634k such events) measured 227 / 190 / 48 ns an
event against the dict's 451 / 255 / 85 (made / encoded in the pack's `encode_lines` /
freed; a loaded 2-core machine, so read the ratios).

Each class's fields are its event's keys in the order `TraceWriter` writes them: "t",
"ev" (given as each event is made), then its fields as `record` is handed them, so
msgspec encodes the same line the dict gives. A key the dict leaves out where it has
nothing to say (`request_submit`'s `prompt`, `request_preempt`'s `reason`) makes a class
of its own rather than a default, so every field of a Struct is written. "t" is set to
its rounded value when the tail is packed; a reader never sees a Struct (the writer makes
the ones it holds into dicts, `_settle`; the others are read from their lines).
"""

from __future__ import annotations

import msgspec


class RequestSubmit(msgspec.Struct, gc=False):
    t: float
    ev: str
    round: int
    group: int
    sample: int
    prompt_tokens: int
    resumed_tokens: int
    engine: int


class RequestSubmitPrompt(RequestSubmit, gc=False):
    """`request_submit` of a prompt whose index is not its group's (`prompt_field`): the
    parent's fields, then `prompt` (msgspec encodes a subclass's new fields last)."""

    prompt: int


class RequestAdmit(msgspec.Struct, gc=False):
    t: float
    ev: str
    group: int
    sample: int
    engine: int


class RequestPreempt(msgspec.Struct, gc=False):
    t: float
    ev: str
    group: int
    sample: int


class RequestRequeue(msgspec.Struct, gc=False):
    """`request_preempt` of a weight install's requeue (reason "recompute")."""

    t: float
    ev: str
    group: int
    sample: int
    reason: str


class RequestFinish(msgspec.Struct, gc=False):
    """`gc=False` although it holds lists: they hold ints only, so no cycle runs through
    it (the run's collector is off anyway, `no_collections`)."""

    t: float
    ev: str
    group: int
    sample: int
    response_tokens: int
    status: str
    versions: list[int]
    version_spans: list[list[int]]
