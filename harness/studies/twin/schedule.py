"""The schedule a run ran, read from its trace, for its twin to replay.

Why: the twin of a run must schedule its work as the run did. A rolloutbench
trace says so outright (its header holds the config that ran). An imported run
says it only through what happened: a slime run with `--over-sampling-batch-size`
and `--partial-rollout` shows aborted attempts at a round's end and responses
resumed in a later round with their carried prefix (slime's
`metadata["start_rollout_id"]`, THUDM/slime@624b824:slime/rollout/sglang_rollout.py;
see harness/imports/slime.py). That schedule is APRIL's (RLsys-Foundation/APRIL
is slime's over-sampling with partial rollouts; systems/april.py cites the
lines), so the twin of such a run is `april` with the run's own knobs:

- `over_sampling_groups`: the groups a round had in flight, counted as the
  distinct groups submitted in each round but the last (the last round's
  aborted groups never come back in a dump, so its count is short), the median
  of those, and never below R. A lower bound: a group aborted and dropped
  without `--partial-rollout` leaves no trace in slime's dumps;
- `partial_rollout`: any attempt resumed with a carried prefix;
- `dynamic_sampling`: any group generated and then not trained (a `drop_group`);
  with no aborts that is DAPO's filter on the synchronous schedule, which
  systems/april.py runs as `over_sampling_groups` = R without partial rollout.

A slime run without aborts is slime's synchronous schedule; other imports
(veRL, PipelineRL, AReaL) keep their own system with its defaults, and say that
nothing was inferred.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.trace import iter_trace

# What a rolloutbench trace's config holds that the twin does not take from it: the
# counterfactual's own (the work, the cluster, the runtime) or the run's identity.
NOT_SCHEDULE = ("system", "workload", "runtime", "seed", "rounds", "groups", "group_size",
                "update_groups", "max_response_tokens", "sim", "live")


@dataclass(frozen=True)
class Schedule:
    """What replays the run: a system, its knobs, and what was inferred, in words."""

    system: str
    knobs: dict[str, Any] = field(default_factory=dict)
    said: str = ""


def infer(path: Path, header: dict[str, Any], groups: int) -> Schedule:
    """The twin's schedule for the trace at `path` (header read already; `groups`:
    the trace's R)."""
    system = str(header.get("system", ""))
    config = header.get("config") if isinstance(header.get("config"), dict) else {}
    if header.get("runtime") != "import":
        knobs = {k: v for k, v in config.items() if k not in NOT_SCHEDULE}
        return Schedule(system, knobs, f"{system} with the knobs its trace header records")
    if system != "slime":
        return Schedule(system, {}, f"{system} with its defaults (nothing to infer from a "
                                    f"{header.get('import', {}).get('format', system)} import)")
    submitted: dict[int, set[int]] = defaultdict(set)
    aborted = resumed = dropped = False
    for ev in iter_trace(path, allow_cut=True):  # a run killed mid-line: as far as it goes
        kind = ev["ev"]
        if kind == "request_submit":
            submitted[ev["round"]].add(ev["group"])
            resumed |= ev.get("resumed_tokens", 0) > 0
        elif kind == "request_finish":
            aborted |= ev["status"] == "aborted"
        elif kind == "decision" and ev.get("what") == "drop_group":
            dropped = True
    if not aborted and not dropped:
        return Schedule("slime", {}, "slime's synchronous schedule (no request was aborted)")
    if not aborted:  # DAPO's filter on the synchronous schedule: APRIL's baseline reading
        return Schedule("april", {"over_sampling_groups": groups, "partial_rollout": False,
                                  "dynamic_sampling": True},
                        "slime with dynamic sampling (groups dropped, none aborted): replayed "
                        "as april without over-sampling or partial rollout")
    rounds = sorted(submitted)
    counted = [len(submitted[r]) for r in rounds[:-1]] or [len(submitted[rounds[-1]])]
    in_flight = max(groups, round(statistics.median(counted)))
    knobs = {"over_sampling_groups": in_flight, "partial_rollout": resumed,
             "dynamic_sampling": dropped}
    said = (f"slime with over-sampling (at least {in_flight} groups a round in flight for "
            f"R={groups}, from the aborted attempts){', partial rollout' * resumed}"
            f"{', dynamic sampling' * dropped}: replayed as april with those knobs")
    return Schedule("april", knobs, said)
