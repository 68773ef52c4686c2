"""`rolloutbench check TRACE`: properties a scheduler promises, checked on any trace.

Five properties, one module each, all reading one view of the trace (`model`) and
the bounds of `bounds` (each says where it came from):

- `staleness`: every trained token's lag is within the staleness bound;
- `backlog`: the samples generated but not yet trained stay within the capacity;
- `starvation`: every started group is trained, or its drop is recorded with a reason;
- `lengths`: the responses trained are as long as those sampled;
- `throughput`: generation does not collapse after a barrier.

The bugs each catches, with their reports, are in the modules' docstrings:
AReaL#1388 (staleness), Megatron-LM#5853 (backlog and staleness), prime-rl#1372
(throughput), tinker-cookbook#822 (length bias). docs/check.md explains the
thresholds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.analysis.check import backlog, bounds, lengths, staleness, starvation, throughput
from harness.analysis.check.model import TraceView
from harness.analysis.check.result import Result


@dataclass
class Limits:
    """Bounds the user gives; None: the trace's own (`bounds`)."""

    bound: int | None = None
    max_backlog: int | None = None
    max_wait: int | None = None


def check_events(events: Sequence[dict[str, Any]], limits: Limits | None = None
                 ) -> list[Result]:
    """Every property's result for a trace's events (`run_start` first)."""
    limits = limits or Limits()
    view = TraceView.of(events)
    stale = bounds.staleness(view.head, limits.bound)
    return [
        staleness.check(view, stale),
        backlog.check(view, bounds.backlog(view, limits.max_backlog, stale)),
        starvation.check(view, bounds.wait(limits.max_wait, stale)),
        lengths.check(view),
        throughput.check(view),
    ]


def verdict(results: list[Result]) -> bool | None:
    """False when a property failed, True when every property judged held, None when
    none was judged (no bound stated, nothing to judge on): that is no pass."""
    if any(r.passed is False for r in results):
        return False
    return True if any(r.passed for r in results) else None


def report(path: str, events: Sequence[dict[str, Any]], results: list[Result]
           ) -> dict[str, Any]:
    """The JSON report: the trace, its system and runtime, the verdict, the results."""
    head = events[0]
    return {"trace": path, "system": head.get("system"), "runtime": head.get("runtime"),
            "passed": verdict(results), "properties": [r.to_dict() for r in results]}
