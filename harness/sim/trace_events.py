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
the ones it holds into dicts, `_settle`; the others are read from their lines). A
memory-only run makes the dicts themselves (`Makers`).
"""

from __future__ import annotations

from operator import attrgetter, itemgetter
from typing import Any

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


# The same events as the dicts `record` builds, made by the same calls (`Makers.dicts`):
# a memory-only run hands its held events to its reader as dicts, so a Struct there is
# made only to be turned into one (`_settle`'s asdict: 0.5 us, against 0.1 to make it).
def _submit(t: float, ev: str, round: int, group: int, sample: int, prompt_tokens: int,  # noqa: A002
            resumed_tokens: int, engine: int) -> dict:
    return {"t": t, "ev": ev, "round": round, "group": group, "sample": sample,
            "prompt_tokens": prompt_tokens, "resumed_tokens": resumed_tokens, "engine": engine}


def _submit_prompt(t: float, ev: str, round: int, group: int, sample: int,  # noqa: A002
                   prompt_tokens: int, resumed_tokens: int, engine: int, prompt: int) -> dict:
    return {"t": t, "ev": ev, "round": round, "group": group, "sample": sample,
            "prompt_tokens": prompt_tokens, "resumed_tokens": resumed_tokens, "engine": engine,
            "prompt": prompt}


def _admit(t: float, ev: str, group: int, sample: int, engine: int) -> dict:
    return {"t": t, "ev": ev, "group": group, "sample": sample, "engine": engine}


def _preempt(t: float, ev: str, group: int, sample: int) -> dict:
    return {"t": t, "ev": ev, "group": group, "sample": sample}


def _requeue(t: float, ev: str, group: int, sample: int, reason: str) -> dict:
    return {"t": t, "ev": ev, "group": group, "sample": sample, "reason": reason}


def _finish(t: float, ev: str, group: int, sample: int, response_tokens: int, status: str,
            versions: list[int], version_spans: list[list[int]]) -> dict:
    return {"t": t, "ev": ev, "group": group, "sample": sample,
            "response_tokens": response_tokens, "status": status, "versions": versions,
            "version_spans": version_spans}


class Makers(msgspec.Struct, frozen=True):
    """What makes each of a request's events: the Structs (a written run's, encoded
    cheaper) or the dicts (a memory-only run's, held as they are), called alike; `time`
    reads an event's t."""

    submit: Any
    submit_prompt: Any
    admit: Any
    preempt: Any
    requeue: Any
    finish: Any
    time: Any

    @classmethod
    def of(cls, written: bool) -> Makers:
        if written:
            return cls(RequestSubmit, RequestSubmitPrompt, RequestAdmit, RequestPreempt,
                       RequestRequeue, RequestFinish, attrgetter("t"))
        return cls(_submit, _submit_prompt, _admit, _preempt, _requeue, _finish,
                   itemgetter("t"))
