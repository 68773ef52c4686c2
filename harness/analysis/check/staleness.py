"""Staleness: every trained token lags the policy being trained by at most L steps.

Lag of a token = the trainer's version when the batch holding it is trained - the
policy version that generated it (`harness.core.offpolicy`; the runtimes record the
same figure per step as `optimizer_step.lag_max`). Measured here from the responses'
`version_spans`, so an imported trace is checked the same way as a simulated one,
where its source recorded training and versions (`source`: else not checked).

The bug it catches, AReaL#1388 (https://github.com/areal-project/AReaL/issues/1388):
after a resume from a checkpoint the staleness manager's `accepted` count restarted
at 0 while the version was restored, so its capacity (max_staleness + version + 1) x
batch - accepted admitted a burst of rollouts and the staleness of trained samples
rose far past `max_head_offpolicyness` (the fix, AReaL PR #1345, sets accepted to
version x batch on recovery). Megatron-LM#5853's open-loop submission showed the
same symptom: staleness past `--rl-generation-lag`.
"""

from __future__ import annotations

from harness.analysis.check.bounds import Bound
from harness.analysis.check.model import TraceView
from harness.analysis.check.result import Result, offence, unjudged
from harness.analysis.check.source import untrained, unversioned

NAME = "staleness"


def check(view: TraceView, bound: Bound) -> Result:
    # an import without training, or whose versions the import assumed: not judged
    gap = untrained(view) or unversioned(view.head)
    if gap is not None:
        return unjudged(NAME, "steps", bound.source, gap)
    worst = tokens = over = 0
    first = None
    for b in view.batches:
        if b.version is None:
            continue
        for gid in b.groups:
            group = view.groups.get(gid)
            if group is None:
                continue
            for resp in group.finished:
                for version, n in resp.spans:
                    lag = b.version - version
                    tokens += n
                    worst = max(worst, lag)
                    if bound.value is not None and lag > bound.value:
                        over += n
                        if first is None:
                            first = offence(view.events[b.index], gid, b.batch)
    if tokens == 0:
        return unjudged(NAME, "steps", bound.source, "no trained tokens in the trace")
    share = f"{over} of {tokens} trained tokens past it" if over else f"{tokens} trained tokens"
    if bound.value is None:
        return Result(NAME, None, worst, "steps", None, bound.source,
                      f"most lag {worst} over {tokens} trained tokens")
    return Result(NAME, over == 0, worst, "steps", bound.value, bound.source,
                  f"most lag {worst}; {share}", first)
