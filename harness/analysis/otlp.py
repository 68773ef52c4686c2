"""A trace as OTLP/JSON (an `ExportTraceServiceRequest`), for OpenTelemetry tools.

Why: distributed RL tracing is moving to OpenTelemetry (alibaba/ROLL writes OTLP JSON;
verl's RL-Insight and xtuner export to Tempo), so a rolloutbench run, simulated, live
or imported, can be laid beside a real one in the same viewer (Jaeger, Tempo).

Span names are the RL training-loop names proposed for OpenTelemetry (`rl.loop`,
`rl.sample`, `rl.reward`, `rl.train`, `rl.sync`; docs/import.md says which proposal),
samples carry the GenAI `gen_ai.usage.*` token counts, and what the proposals do not
name is a `rolloutbench.*` attribute. One root span, `rolloutbench.run`, holds the
run (the proposals name no span for it; `rl.run.id` is a resource attribute there).

Every trace event is also kept whole, as a span event `rolloutbench.<ev>` holding its
line (`rolloutbench.event`) and its place in the trace (`rolloutbench.seq`), on the
span it belongs to: `rolloutbench import otlp` puts the lines back in order, so export
then import gives the same trace and the same metrics (times in nanoseconds alone
would round them, and ties at one instant would lose their order).

Ids are derived, not drawn: the trace id from the run's header (system, workload,
seed, config), each span's from the trace id and what the span is (round 3's loop,
the second attempt of group 7's sample 1), so one trace always exports the same bytes.
Times are nanoseconds since the Unix epoch with the run's start at 0 (a trace's `t`
is seconds since its run began; it records no wall-clock start).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import msgspec

from harness import __version__

SCOPE = "rolloutbench"
_encode = msgspec.json.Encoder().encode


def any_value(value: Any) -> dict[str, Any]:
    """OTLP/JSON AnyValue of a JSON value (int64 as a decimal string, as protobuf's
    JSON mapping writes it; null as the empty AnyValue)."""
    if value is None:
        return {}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": attributes(value)}}
    raise TypeError(f"no AnyValue for {type(value).__name__}")


def attributes(fields: dict[str, Any]) -> list[dict[str, Any]]:
    """OTLP KeyValue list, in the dict's order."""
    return [{"key": k, "value": any_value(v)} for k, v in fields.items()]


def _nanos(t: float) -> str:
    return str(round(t * 1e9))


def _hex(*parts: object, size: int) -> str:
    text = "|".join(str(p) for p in parts)
    return hashlib.sha256(text.encode()).hexdigest()[:size * 2]


class _Span:
    """A span being built: opened by one event, closed by another (or the run's end)."""

    def __init__(self, ids: tuple[str, str], name: str, parent: str, start: float,
                 attrs: dict[str, Any]) -> None:
        self.trace_id, self.span_id = ids
        self.name, self.parent, self.start = name, parent, start
        self.end: float | None = None
        self.attrs = attrs
        self.events: list[dict[str, Any]] = []

    def doc(self, run_end: float) -> dict[str, Any]:
        out: dict[str, Any] = {"traceId": self.trace_id, "spanId": self.span_id}
        if self.parent:
            out["parentSpanId"] = self.parent
        end = self.end if self.end is not None else max(run_end, self.start)
        out.update(name=self.name, kind=1, startTimeUnixNano=_nanos(self.start),
                   endTimeUnixNano=_nanos(end), attributes=attributes(self.attrs))
        if self.events:
            out["events"] = self.events
        return out


class _Builder:
    """The spans of one trace, made in one pass over its events."""

    def __init__(self, head: dict[str, Any]) -> None:
        identity = _encode([head.get("system"), head.get("workload"), head.get("seed"),
                            head.get("config")])
        self.trace_id = _hex("rolloutbench-trace", identity.decode(), size=16)
        self.spans: list[_Span] = []
        self.root = self.open("rolloutbench.run", ("run",), "", head["t"], {
            "rolloutbench.system": head.get("system"),
            "rolloutbench.workload": head.get("workload"),
            "rolloutbench.runtime": head.get("runtime")})
        self.loops: dict[int, _Span] = {}  # round -> its rl.loop
        self.loop: _Span = self.root  # the round under way (the last rollout_start)
        self.samples: dict[tuple[int, int], _Span] = {}  # open rl.sample per request
        self.attempts: dict[tuple[int, int], int] = defaultdict(int)
        self.rewards: dict[int, _Span] = {}  # group -> its rl.reward (complete..materialized)
        self.train: _Span | None = None
        self.trains = 0
        self.syncs: dict[int, _Span] = {}  # version -> its rl.sync, open until published

    def open(self, name: str, key: tuple[object, ...], parent: str, start: float,
             attrs: dict[str, Any]) -> _Span:
        ids = (self.trace_id, _hex(self.trace_id, name, *key, size=8))
        span = _Span(ids, name, parent, start, attrs)
        self.spans.append(span)
        return span

    def place(self, e: dict[str, Any]) -> _Span:
        """The span an event belongs to, opening or closing spans as it goes."""
        ev, t = e["ev"], e["t"]
        if ev == "rollout_start":
            self.loop = self.loops[e["round"]] = self.open(
                "rl.loop", ("round", e["round"]), self.root.span_id, t,
                {"rolloutbench.round": e["round"], "rolloutbench.version": e["version"]})
            return self.loop
        if ev == "rollout_complete":
            loop = self.loops.get(e["round"], self.loop)
            loop.end = t
            return loop
        if ev == "request_submit":
            return self._submit(e)
        if ev in ("request_admit", "request_preempt", "request_finish"):
            span = self.samples.get((e["group"], e["sample"]))
            if span is None:
                return self.loop
            if ev == "request_finish":
                self._finish(span, e)
            return span
        if ev in ("group_complete", "group_materialized"):
            return self._reward(e)
        if ev == "train_start":
            self.trains += 1
            self.train = self.open("rl.train", ("train", self.trains), self.loop.span_id, t,
                                   {"rolloutbench.batch": e["batch"]})
            return self.train
        if ev == "train_end" and self.train is not None:
            span, self.train = self.train, None
            span.end = t
            return span
        if ev == "optimizer_step":
            self.syncs[e["version"]] = self.open(
                "rl.sync", ("sync", e["version"]), self.loop.span_id, t,
                {"rolloutbench.version": e["version"]})
            return self.syncs[e["version"]]
        if ev == "weights_published":
            span = self.syncs.pop(e["version"], None) or self.open(
                "rl.sync", ("sync", e["version"]), self.loop.span_id, t,
                {"rolloutbench.version": e["version"]})
            span.end = t
            return span
        if ev == "run_end":
            return self.root
        return self.loop

    def _submit(self, e: dict[str, Any]) -> _Span:
        key = (e["group"], e["sample"])
        self.attempts[key] += 1
        parent = self.loops.get(e["round"], self.loop)
        span = self.open("rl.sample", ("sample", *key, self.attempts[key]), parent.span_id,
                         e["t"], {
                             "gen_ai.operation.name": "text_completion",
                             "gen_ai.usage.input_tokens": e["prompt_tokens"],
                             "rolloutbench.round": e["round"],
                             "rolloutbench.group": e["group"],
                             "rolloutbench.sample": e["sample"],
                             "rolloutbench.resumed_tokens": e.get("resumed_tokens", 0)})
        self.samples[key] = span
        return span

    def _finish(self, span: _Span, e: dict[str, Any]) -> None:
        span.end = e["t"]
        del self.samples[(e["group"], e["sample"])]
        resumed = span.attrs["rolloutbench.resumed_tokens"]
        span.attrs.update({  # generated by this request: the carried prefix was its input
            "gen_ai.usage.output_tokens": e["response_tokens"] - resumed,
            "rolloutbench.response_tokens": e["response_tokens"],
            "rolloutbench.status": e["status"],
            "rolloutbench.versions": e["versions"]})

    def _reward(self, e: dict[str, Any]) -> _Span:
        span = self.rewards.get(e["group"])
        if span is None:
            span = self.rewards[e["group"]] = self.open(
                "rl.reward", ("reward", e["group"]), self.loop.span_id, e["t"],
                {"rolloutbench.group": e["group"]})
        if e["ev"] == "group_materialized":
            span.end = e["t"]
            if "rewards" in e:
                span.attrs["rolloutbench.rewards"] = e["rewards"]
        return span


def export(events: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The trace as one OTLP/JSON ExportTraceServiceRequest."""
    head = events[0]
    build = _Builder(head)
    for seq, e in enumerate(events):
        span = build.place(e)
        span.events.append({"timeUnixNano": _nanos(e["t"]), "name": f"rolloutbench.{e['ev']}",
                            "attributes": attributes({"rolloutbench.seq": seq,
                                                      "rolloutbench.event": _encode(e).decode()})})
    run_end = max(e["t"] for e in events)
    build.root.end = run_end
    resource = {"service.name": "rolloutbench", "rl.system": head.get("system"),
                "rl.run.id": build.trace_id, "rolloutbench.seed": head.get("seed")}
    return {"resourceSpans": [{
        "resource": {"attributes": attributes(resource)},
        "scopeSpans": [{"scope": {"name": SCOPE, "version": __version__},
                        "spans": [s.doc(run_end) for s in build.spans]}]}]}
