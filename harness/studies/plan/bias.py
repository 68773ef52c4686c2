"""Which responses a configuration trains: a schedule can be fast partly because
it trains the short ones (APRIL's aborts, a long tail deferred), which changes
what the model learns. A plan shows each configuration's mean trained response
length against the workload's and flags the ones that differ by more than BIAS.
"""

from __future__ import annotations

from harness.studies.plan.recipe import Plan

BIAS = 0.10
"""More than 10% shorter (or longer) than the workload's: a biased subset. Flagged,
never excluded: whether that matters is the user's call."""


def workload_response_tokens(plan: Plan) -> float:
    """The mean response length (capped) of the recipe's prompts: what a schedule
    that trains every response of its rounds trains, the synchronous baseline's
    R x rounds groups of K, drawn from the workload as the simulator draws them."""
    from workloads.profile import make_workload, workload_limits

    r = plan.recipe
    cap = r.max_response_tokens or workload_limits(r.workload, r.group_size)[0]
    prompts = make_workload(r.workload, r.seed, r.group_size).take(r.groups * r.rounds)
    lengths = [min(n, cap) for p in prompts for n in p.hidden.lengths[:r.group_size]]
    return sum(lengths) / len(lengths)


def biased(share: float) -> bool:
    """True when a trained response length differs from the workload's beyond BIAS."""
    return bool(share == share and abs(share - 1.0) > BIAS)
