"""A trace read once into what the checks need: groups, their responses, batches.

Every property in this package reads the same view, built in one pass over the
events (`TraceView.of`). The rules it applies, in one place:

- a group is *started* by its first `request_submit`;
- a response is the last `request_finish` of its (group, sample); its tokens carry
  `version_spans`, or, where a trace has only `versions` ([first, last]), every token
  is counted under the first, the oldest, as `harness.core.metrics` does: the lag of
  such a response is never understated;
- a group is *trained* by the `batch_dispatch` that names it, and its tokens are
  trained at the version the trainer holds for that batch: the version the next
  `optimizer_step` after the batch's `train_start` moves away from (that step's
  `version` - 1), or, with no step after it, the last step's `version` before it (or
  the first `rollout_start`'s version). This is the lag the runtimes record:
  `harness.sim.components` and `harness.live.trainer` take it at train time;
- a group is *dropped* by a `decision` `drop_group` (`group`) or `discard_groups`
  (`groups`), whose `reason` says why;
- a group is *stopped* when it is neither trained nor dropped and its last attempt
  ended in an abort that was never resumed: the runtime recorded the abort
  (RollPacker's tail batching re-runs such a prompt under a new group id; APRIL's
  carried groups at the run's end are the others).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.core.yardstick import DROPS  # the one list of the decisions that drop groups


@dataclass
class Response:
    """One sample's final attempt."""

    tokens: int
    status: str
    spans: list[list[int]]
    index: int  # position of its request_finish in the trace


@dataclass
class GroupView:
    gid: int
    started: int  # index of its first request_submit
    responses: dict[int, Response] = field(default_factory=dict)
    in_flight: set[int] = field(default_factory=set)  # samples submitted, not finished
    trainable: int | None = None  # index of group_materialized (else group_complete)
    batch: int | None = None  # the batch that trained it
    dispatched: int | None = None  # index of that batch_dispatch
    dropped: int | None = None  # index of the decision that dropped it
    reason: str | None = None

    @property
    def finished(self) -> list[Response]:
        return [r for r in self.responses.values() if r.status == "finished"]

    @property
    def stopped(self) -> bool:
        """Neither trained nor dropped, and its last attempt was aborted, not resumed."""
        return (self.batch is None and self.dropped is None and not self.in_flight
                and any(r.status == "aborted" for r in self.responses.values()))

    @property
    def resolved(self) -> int | None:
        """Index where the group left the pipeline: trained, dropped or stopped."""
        if self.dispatched is not None:
            return self.dispatched
        if self.dropped is not None:
            return self.dropped
        if self.stopped:
            return max(r.index for r in self.responses.values())
        return None


@dataclass
class BatchView:
    batch: int
    index: int  # its batch_dispatch
    t: float
    groups: list[int]
    version: int | None = None  # the trainer's version when it was trained


@dataclass
class TraceView:
    events: Sequence[dict[str, Any]]
    groups: dict[int, GroupView]
    batches: list[BatchView]
    steps: list[int]  # indices of optimizer_step events

    @property
    def head(self) -> dict[str, Any]:
        return self.events[0]

    @classmethod
    def of(cls, events: Sequence[dict[str, Any]]) -> TraceView:
        groups: dict[int, GroupView] = {}
        batches: list[BatchView] = []
        steps: list[int] = []
        starts: dict[int, int] = {}  # batch -> index of its first train_start
        first_version: int | None = None
        for i, e in enumerate(events):
            ev = e["ev"]
            if ev == "request_submit":
                g = groups.setdefault(e["group"], GroupView(e["group"], i))
                g.in_flight.add(e["sample"])
            elif ev == "request_finish" and e["group"] in groups:
                g = groups[e["group"]]
                g.in_flight.discard(e["sample"])
                g.responses[e["sample"]] = Response(e["response_tokens"], e["status"],
                                                    _spans(e), i)
            elif ev in ("group_materialized", "group_complete") and e["group"] in groups:
                g = groups[e["group"]]
                if g.trainable is None or ev == "group_materialized":
                    g.trainable = i
            elif ev == "batch_dispatch":
                batches.append(BatchView(e["batch"], i, e["t"], list(e["groups"])))
                for gid in e["groups"]:
                    if gid in groups and groups[gid].batch is None:
                        groups[gid].batch, groups[gid].dispatched = e["batch"], i
            elif ev == "train_start":
                starts.setdefault(e["batch"], i)
            elif ev == "optimizer_step":
                steps.append(i)
            elif ev == "rollout_start" and first_version is None:
                first_version = e["version"]
            elif ev == "decision" and e.get("what") in DROPS:
                named = [e["group"]] if "group" in e else list(e.get("groups", []))
                for gid in named:
                    if gid in groups and groups[gid].dropped is None:
                        groups[gid].dropped, groups[gid].reason = i, e.get("reason")
        for b in batches:
            b.version = _version_at(events, steps, starts.get(b.batch, b.index),
                                    first_version)
        return cls(events, groups, batches, steps)


def _spans(e: dict[str, Any]) -> list[list[int]]:
    spans = e.get("version_spans")
    if spans is not None:
        return [list(p) for p in spans]
    first = e["versions"][:1]
    return [[first[0], e["response_tokens"]]] if first and e["response_tokens"] else []


def _version_at(events: Sequence[dict[str, Any]], steps: list[int], at: int,
                first_version: int | None) -> int | None:
    """The trainer's version at event index `at` (see the module's docstring)."""
    k = bisect.bisect_right(steps, at)
    if k < len(steps):
        return int(events[steps[k]]["version"]) - 1
    if k > 0:
        return int(events[steps[k - 1]]["version"])
    return first_version
