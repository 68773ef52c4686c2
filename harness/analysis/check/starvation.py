"""Starvation: every started group is trained, or its drop is recorded with a reason.

Each started group ends one of five ways (`model`): trained; dropped by a
`drop_group` / `discard_groups` decision; stopped (its last attempt aborted and never
resumed: the runtime recorded the abort); still generating when the trace ends; or
trainable (complete) and still untrained when it ends. A finite trace cannot say
whether the last two would have been trained, so they are judged by how long they
waited: the optimizer steps taken after the group became trainable. It fails when

- a drop is recorded without a `reason` (the decision must say why: the convention
  every system follows, `decision`/`drop_group` with `reason`), or
- a group left untrained at the end waited more steps than the wait bound
  (`bounds.wait`: `--max-wait`, else the staleness bound, past which the group can
  no longer be trained within it: the system should have dropped it and said so).

Without a wait bound, groups left untrained at the end are counted, not judged. An
import whose source records no training (`source`) is judged on its drops' reasons
only; the rest is not checked: a group the trace never trains was not starved.
The value is the number of starved groups (drops without a reason included).
"""

from __future__ import annotations

import bisect

from harness.analysis.check.bounds import Bound
from harness.analysis.check.model import TraceView
from harness.analysis.check.result import Result, offence, unjudged
from harness.analysis.check.source import untrained

NAME = "starvation"


def check(view: TraceView, bound: Bound) -> Result:
    if not view.groups:
        return unjudged(NAME, "groups", bound.source, "no requests in the trace")
    gap = untrained(view)
    if gap is not None:
        return _drops_only(view, bound, gap)
    if not view.batches:
        return unjudged(NAME, "groups", bound.source, "the trace records no training")
    trained = dropped = stopped = generating = 0
    starved: list[tuple[int, int]] = []  # (event index, group)
    left: list[int] = []  # waits of groups left untrained at the end
    for g in view.groups.values():
        if g.batch is not None:
            trained += 1
        elif g.dropped is not None:
            dropped += 1
            if not g.reason:
                starved.append((g.dropped, g.gid))
        elif g.stopped:
            stopped += 1
        elif g.in_flight or g.trainable is None:
            generating += 1
        else:
            waited = len(view.steps) - bisect.bisect_right(view.steps, g.trainable)
            left.append(waited)
            if bound.value is not None and waited > bound.value:
                starved.append((g.trainable, g.gid))
    parts = [f"{trained} trained", f"{dropped} dropped"]
    parts += [f"{stopped} stopped by an abort"] if stopped else []
    parts += [f"{generating} generating at the end"] if generating else []
    if left:
        parts.append(f"{len(left)} untrained at the end (waited <= {max(left)} steps)")
    detail = ", ".join(parts)
    first = None
    if starved:
        index, gid = min(starved)
        first = offence(view.events[index], gid)
    no_reason = sum(1 for g in view.groups.values()
                    if g.batch is None and g.dropped is not None and not g.reason)
    if no_reason:
        detail = f"{no_reason} drops without a reason; " + detail
    if bound.value is None and left and not starved:
        return Result(NAME, None, 0, "groups", None, bound.source, detail)
    return Result(NAME, not starved, len(starved), "groups", bound.value, bound.source,
                  detail, first)


def _drops_only(view: TraceView, bound: Bound, gap: str) -> Result:
    """An import without training: only its drops are on record, and each must say
    why (a drop the import cannot explain is still the import's to explain:
    harness.imports.build gives the source's rejections a reason)."""
    drops = sorted((g.dropped, g.gid, bool(g.reason)) for g in view.groups.values()
                   if g.dropped is not None)
    bare = [(index, gid) for index, gid, why in drops if not why]
    if bare:
        index, gid = bare[0]
        return Result(NAME, False, len(bare), "groups", bound.value, bound.source,
                      f"{len(bare)} drops without a reason; {gap}",
                      offence(view.events[index], gid))
    said = {0: "", 1: "; 1 drop, with a reason"}.get(len(drops),
                                                      f"; {len(drops)} drops, each with a reason")
    return unjudged(NAME, "groups", bound.source, gap + said)
