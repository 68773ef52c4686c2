"""Backlog: samples generated but not yet trained stay within the admission capacity.

The backlog after each event is the number of finished responses whose group has
not yet left the pipeline: trained (its `batch_dispatch`), dropped (a `drop_group`
decision) or stopped (aborted and never resumed, `model`). A group still waiting
when the trace ends stays in it. The peak is held to the bound of `bounds.backlog`.
An import whose source records no training is not checked (`source`): every
response would stay in the backlog for want of a record, not of training.

The bug it catches, NVIDIA/Megatron-LM#5853 (https://github.com/NVIDIA/Megatron-LM/
pull/5853): with group submission the submission gate freed a slot when a group was
assembled instead of when the trainer consumed it, so generation ran open-loop ahead
of the trainer: the (lag+1) x prompts run-ahead cap was never enforced and the
backlog grew to 43k rollouts by step 8 in a lag-5 run.
"""

from __future__ import annotations

from collections import defaultdict

from harness.analysis.check.bounds import Bound
from harness.analysis.check.model import TraceView
from harness.analysis.check.result import Result, offence, unjudged
from harness.analysis.check.source import untrained

NAME = "backlog"


def check(view: TraceView, bound: Bound) -> Result:
    gap = untrained(view)  # no response would ever leave: the source's gap, not a backlog
    if gap is not None:
        return unjudged(NAME, "samples", bound.source, gap)
    leaves: dict[int, list[int]] = defaultdict(list)  # event index -> groups leaving
    for g in view.groups.values():
        if g.resolved is not None:
            leaves[g.resolved].append(g.gid)
    counted: dict[int, int] = defaultdict(int)  # group -> its samples in the backlog
    gone: set[int] = set()
    level = peak = 0
    first = None
    for i, e in enumerate(view.events):
        if e["ev"] == "request_finish" and e["status"] == "finished":
            gid = e["group"]
            if gid in view.groups and gid not in gone:
                counted[gid] += 1
                level += 1
                if bound.value is not None and level > bound.value and first is None:
                    first = offence(e, gid)
        for gid in leaves.get(i, ()):
            level -= counted.pop(gid, 0)
            gone.add(gid)
        peak = max(peak, level)
    if not view.groups:
        return unjudged(NAME, "samples", bound.source, "no requests in the trace")
    if bound.value is None:
        return Result(NAME, None, peak, "samples", None, bound.source,
                      f"peak {peak} generated, untrained samples")
    return Result(NAME, peak <= bound.value, peak, "samples", bound.value, bound.source,
                  f"peak {peak} generated, untrained samples", first)
