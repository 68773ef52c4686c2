"""Length bias: the responses trained are as long as the responses sampled.

Dropping or deferring stale groups biases training toward fast problems: the long
responses are the ones that take longest, so they are the ones that go stale
(thinking-machines-lab/tinker-cookbook PR #822, "enforce staleness by pacing
sampling instead of discarding rollouts"). Here `sampled` is every finished response
of every started group, `trained` those of the groups a batch trained.

The value is the ratio mean(trained lengths) / mean(sampled lengths). It fails when
both hold:

- the ratio is outside 1 +/- `TOLERANCE` (0.10): a shift of a tenth of the mean
  length is material for a trainer (the token budget per step and the length
  the policy is pulled toward move with it), while a selection the scheduler
  makes independently of length moves it by far less on any run long enough to
  judge; and
- the lengths of the groups trained and of those left untrained differ beyond
  chance: a two-sided Mann-Whitney U test (scipy.stats.mannwhitneyu) on each group's
  mean response length, p < `ALPHA` (0.01). Groups, not responses, are the units:
  the K responses of one prompt are not independent draws. The test keeps a short run
  with a handful of untrained groups from failing on noise alone.

A trace whose every sampled group was trained passes with ratio 1.
"""

from __future__ import annotations

from typing import Any

from harness.analysis.check.model import TraceView
from harness.analysis.check.result import Result, offence, unjudged
from harness.analysis.check.source import untrained as unrecorded

NAME = "length bias"
TOLERANCE = 0.10
ALPHA = 0.01
SOURCE = f"|ratio-1| <= {TOLERANCE} or Mann-Whitney p >= {ALPHA}"


def check(view: TraceView) -> Result:
    trained: list[float] = []  # per-group mean lengths
    untrained: list[float] = []
    lengths = {True: 0, False: 0}
    counts = {True: 0, False: 0}
    for g in view.groups.values():
        done = [r.tokens for r in g.finished]
        if not done:
            continue
        side = g.batch is not None
        (trained if side else untrained).append(sum(done) / len(done))
        lengths[side] += sum(done)
        counts[side] += len(done)
    if not trained:
        return unjudged(NAME, "ratio", SOURCE,
                        unrecorded(view) or "no trained responses in the trace")
    total = lengths[True] + lengths[False]
    if total == 0:  # a source that records no lengths (ROLL's spans): every response 0
        return unjudged(NAME, "ratio", SOURCE, "no response in the trace has a length "
                        "(the source records none)")
    ratio = (lengths[True] / counts[True]) / (total / (counts[True] + counts[False]))
    detail = (f"{counts[True]} trained of {counts[True] + counts[False]} sampled responses"
              f" ({len(untrained)} groups untrained)")
    if not untrained:
        return Result(NAME, True, 1.0, "ratio", TOLERANCE, SOURCE, detail)
    p = 1.0
    if len(trained) >= 2 and len(untrained) >= 2:
        from scipy.stats import mannwhitneyu

        p = float(mannwhitneyu(trained, untrained, alternative="two-sided").pvalue)
    failed = abs(ratio - 1) > TOLERANCE and p < ALPHA
    return Result(NAME, not failed, round(ratio, 4), "ratio", TOLERANCE, SOURCE,
                  f"{detail}; Mann-Whitney p = {p:.2g}", _first(view, ratio) if failed else None)


def _first(view: TraceView, ratio: float) -> dict[str, Any] | None:
    """The first untrained group on the side the bias leans away from (longer than the
    trained mean when training is short), at the event that left it out."""
    done = [r.tokens for g in view.groups.values() if g.batch is not None for r in g.finished]
    mean = sum(done) / len(done)
    out = []
    for g in view.groups.values():
        lens = [r.tokens for r in g.finished]
        if g.batch is None and lens and (sum(lens) / len(lens) > mean) == (ratio < 1):
            at = g.resolved if g.resolved is not None else max(r.index for r in g.finished)
            out.append((at, g.gid))
    if not out:
        return None
    at, gid = min(out)
    return offence(view.events[at], gid)
