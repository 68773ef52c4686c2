"""The off-policy figures of `round_metrics` (issue #36: tokens summed by version per group
as the trace is read, not a list of every sample's spans walked again per round) against
the per-sample loop they replace, on random traces, and one by hand."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.metrics import round_metrics
from tests.test_metrics import ev, finish, head, submit

# a sample: None (still running when the round trains), or its [version, tokens] spans
SPAN = st.tuples(st.integers(0, 4), st.integers(1, 500)).map(list)
SAMPLES = st.lists(st.none() | st.lists(SPAN, min_size=1, max_size=4), min_size=1,
                   max_size=4)


def ref_offpolicy(groups: list[list[list[list[int]]]], start: int) -> tuple[Any, ...]:
    """The loop as it was at 985f382: (old share, most versions, tokens)."""
    old = total = most = 0
    for group in groups:
        for spans in group:
            most = max(most, len({v for v, _ in spans}))
            for v, n in spans:
                total += n
                old += n if v < start else 0
    return (old / total if total else math.nan, most if total else math.nan, total)


@settings(max_examples=150, deadline=None)
@given(st.lists(SAMPLES, min_size=1, max_size=5), st.data(), st.integers(0, 4))
def test_the_off_policy_figures_are_the_per_sample_loops(
        groups: list[list[list[list[int]] | None]], data: st.DataObject, start: int) -> None:
    e = [head(), ev(0.0, "rollout_start", round=0, version=start)]
    for g, samples in enumerate(groups):
        e += [submit(0.0, 0, g, s) for s in range(len(samples))]
        for s, spans in enumerate(samples):
            if spans is not None:
                tokens = sum(n for _, n in spans)
                e.append({**finish(1.0, g, s, tokens, spans[0][0]), "version_spans": spans})
    # batches of any groups, one group maybe twice, one maybe never
    batches = data.draw(st.lists(st.lists(st.integers(0, len(groups) - 1), min_size=1,
                                          max_size=3), min_size=1, max_size=3))
    e.append(ev(2.0, "rollout_complete", round=0))
    for b, gs in enumerate(batches):
        e += [ev(2.0, "batch_dispatch", batch=b, groups=gs), ev(2.0, "train_start", batch=b),
              ev(3.0, "train_end", batch=b)]
    (row,) = round_metrics(e)
    trained = [[s for s in groups[g] if s is not None] for gs in batches for g in gs]
    frac, most, tokens = ref_offpolicy(trained, start)
    got = (row["offpolicy_token_frac"], row["versions_per_sample_max"],
           row["batch_tokens_per_s"])
    assert repr(got) == repr((frac, most, tokens / 2.0))  # the rollout took 2 s


def test_off_policy_figures_by_hand() -> None:
    """Round from version 2; group 0: spans (1, 30) (2, 10) and (2, 60); group 1: one
    sample finished, (0, 100), trained twice (its other still running). Old tokens 30 +
    100 + 100 = 230 of 40 + 60 + 200 = 300; two versions behind sample (0, 0); 300 tokens
    over the 2 s rollout."""
    e = [head(), ev(0.0, "rollout_start", round=0, version=2),
         *[submit(0.0, 0, g, s) for g in range(2) for s in range(2)],
         {**finish(1.0, 0, 0, 40, 1), "version_spans": [[1, 30], [2, 10]]},
         {**finish(1.0, 0, 1, 60, 2), "version_spans": [[2, 60]]},
         finish(1.0, 1, 0, 100, 0),  # no spans: all its tokens count as its first version
         ev(2.0, "rollout_complete", round=0),
         ev(2.0, "batch_dispatch", batch=0, groups=[0, 1, 1]),
         ev(2.0, "train_start", batch=0), ev(3.0, "train_end", batch=0)]
    (row,) = round_metrics(e)
    assert row["offpolicy_token_frac"] == 230 / 300
    assert row["versions_per_sample_max"] == 2
    assert row["batch_tokens_per_s"] == 150.0
