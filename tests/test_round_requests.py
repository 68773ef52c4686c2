"""The round metrics' request columns (harness/core/round_requests.py) against the per-event
pass they replaced, and against a trace worked out by hand.

A finish counts with the latest submission of its group and sample before it in the trace
(none: not counted); its round is that submission's, its new tokens its tokens less the
tokens it resumed from; it crosses when the last `rollout_start` before it is of another
round; a finished one's version spans count its tokens by version, and the versions it
spans (distinct ones). Events come as dicts or as the writer's Structs, in batches of any
size.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.rounds import RoundMetrics
from harness.sim.trace_events import RequestFinish, RequestSubmit


def _reference(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The per-event pass as `RoundMetrics.feed` made it before the columns."""
    submitted: dict[tuple[int, int], tuple[int, int]] = {}
    all_tokens: dict[int, int] = {}
    finished: dict[int, list[int]] = {}
    versions: dict[int, dict[int, int]] = {}
    most: dict[int, int] = {}
    owner, crosses = None, False
    for e in events:
        if e["ev"] == "rollout_start":
            owner = e["round"]
        elif e["ev"] == "request_submit":
            submitted[(e["group"], e["sample"])] = (e["round"], e.get("resumed_tokens", 0))
        elif e["ev"] == "request_finish":
            sent = submitted.get((e["group"], e["sample"]))
            if sent is None:
                continue
            rnd, resumed = sent
            crosses |= owner is not None and owner != rnd
            all_tokens[rnd] = all_tokens.get(rnd, 0) + e["response_tokens"] - resumed
            if e["status"] == "finished":
                finished.setdefault(rnd, []).append(e["response_tokens"])
                spans = e.get("version_spans")
                if spans is None:
                    first = e["versions"][:1]
                    spans = [[first[0], e["response_tokens"]]] if first else []
                hist = versions.setdefault(e["group"], {})
                for v, n in spans:
                    hist[v] = hist.get(v, 0) + n
                most[e["group"]] = max(most.get(e["group"], -1), len({v for v, _ in spans}))
    return {"crosses": crosses, "all_tokens": all_tokens,
            "finished": {r: (sum(n), len(n)) for r, n in finished.items()},
            "versions": {g: h for g, h in versions.items() if h}, "most": most}


def _totals(events: list[Any], cuts: list[int]) -> dict[str, Any]:
    metrics = RoundMetrics()
    start = 0
    for cut in [*sorted(cuts), len(events)]:
        batch = events[start:cut]
        metrics.feed(batch, [e["ev"] if type(e) is dict else e.ev for e in batch])
        start = max(start, cut)
    got = metrics.requests.result()
    return {"crosses": got.crosses, "all_tokens": got.all_tokens, "finished": got.finished,
            "versions": {g: h for g, h in got.versions.items() if h}, "most": got.most}


def _struct(e: dict[str, Any]) -> Any:
    """The event as the compiled pool's writer hands it (every field there)."""
    if e["ev"] == "request_submit":
        return RequestSubmit(e["t"], e["ev"], e["round"], e["group"], e["sample"], 10,
                             e.get("resumed_tokens", 0), 0)
    if e["ev"] == "request_finish" and e.get("version_spans") is not None:
        return RequestFinish(e["t"], e["ev"], e["group"], e["sample"], e["response_tokens"],
                             e["status"], e["versions"], e["version_spans"])
    return e


def _submit(rnd: int, group: int, sample: int, resumed: int = 0) -> dict[str, Any]:
    return {"t": 0.0, "ev": "request_submit", "round": rnd, "group": group, "sample": sample,
            "resumed_tokens": resumed}


def _finish(group: int, sample: int, tokens: int, spans: list[list[int]] | None,
            status: str = "finished", versions: list[int] | None = None) -> dict[str, Any]:
    e: dict[str, Any] = {"t": 0.0, "ev": "request_finish", "group": group, "sample": sample,
                         "response_tokens": tokens, "status": status,
                         "versions": versions if versions is not None
                         else ([spans[0][0], spans[-1][0]] if spans else [])}
    if spans is not None:
        e["version_spans"] = spans
    return e


def _start(rnd: int) -> dict[str, Any]:
    return {"t": 0.0, "ev": "rollout_start", "round": rnd, "version": rnd}


def test_a_trace_worked_by_hand() -> None:
    events = [
        _finish(9, 0, 5, [[0, 5]]),  # before any submission of it: not counted
        _start(0),
        _submit(0, 1, 0), _submit(0, 1, 1), _submit(0, 2, 0),
        _finish(1, 0, 7, [[0, 7]], status="aborted"),  # round 0: 7 new tokens, not finished
        _submit(0, 1, 0, resumed=7),  # sent again, on from its 7 tokens
        _finish(1, 1, 4, [[0, 4]]),
        _start(1),
        _submit(1, 3, 0),
        _finish(1, 0, 12, [[0, 7], [1, 2], [0, 3]]),  # round 0's, after round 1 began: crosses
        _finish(3, 0, 6, None, versions=[1, 2]),  # no spans: all 6 to its first version
        _finish(2, 0, 0, []),  # finished with nothing: spans no version
    ]
    # round 0: 7 (aborted) + 4 + (12 - 7) + 0 = 16 new tokens; finished 4, 12, 0
    # round 1: 6; group 1: version 0 4 + 7 + 3 = 14, version 1 2; group 3: version 1 6
    want = {"crosses": True, "all_tokens": {0: 16, 1: 6},
            "finished": {0: (16, 3), 1: (6, 1)},
            "versions": {1: {0: 14, 1: 2}, 3: {1: 6}},
            "most": {1: 2, 3: 1, 2: 0}}
    assert _reference(events) == want
    assert _totals(events, [3, 7]) == want
    assert _totals([_struct(e) for e in events], [1]) == want


def test_nothing_crosses_without_a_later_round() -> None:
    events = [_start(0), _submit(0, 0, 0), _finish(0, 0, 3, [[0, 3]]), _start(1)]
    got = _totals(events, [])
    assert not got["crosses"] and got["all_tokens"] == {0: 3} and got["most"] == {0: 1}


@st.composite
def _traces(draw: Any) -> tuple[list[dict[str, Any]], list[int], bool]:
    events: list[dict[str, Any]] = []
    rnd = -1
    apart = draw(st.sampled_from([1, 10**9 + 7]))  # ids far apart: counted by a sort
    for _ in range(draw(st.integers(0, 60))):
        kind = draw(st.sampled_from(["start", "submit", "submit", "finish", "finish"]))
        group, sample = draw(st.integers(0, 4)) * apart, draw(st.integers(-1, 3)) * apart
        if kind == "start":
            rnd += 1
            events.append(_start(rnd))
        elif kind == "submit":
            sent = max(rnd - draw(st.integers(0, 1)), 0)  # this round's, or the last's
            events.append(_submit(sent, group, sample, draw(st.integers(0, 5))))
        else:
            spans = draw(st.none() | st.lists(st.tuples(st.integers(0, 3), st.integers(0, 9))
                                              .map(lambda p: [p[0] * apart, p[1]]),
                                              max_size=3))
            tokens = draw(st.integers(0, 50))
            status = draw(st.sampled_from(["finished", "finished", "aborted"]))
            versions = (draw(st.lists(st.integers(0, 3).map(apart.__mul__), max_size=2))
                        if spans is None else None)
            events.append(_finish(group, sample, tokens, spans, status, versions))
    cuts = draw(st.lists(st.integers(0, len(events)), max_size=4))
    return events, cuts, draw(st.booleans())


@settings(max_examples=300, deadline=None)
@given(_traces())
def test_the_columns_are_the_per_event_pass(trace: tuple[list[dict[str, Any]], list[int],
                                                         bool]) -> None:
    events, cuts, structs = trace
    handed = [_struct(e) for e in events] if structs else events
    assert _totals(handed, cuts) == _reference(events)
