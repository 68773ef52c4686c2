"""ROLL Flash's step-time bounds on the staleness study's roll-flash runs, beside the
simulator's critical-path bound.

ROLL Flash (arXiv 2510.11345) states bounds on generation and end-to-end time whose
equations are not readable here (docs/whatif/staleness.md says what was searched);
`harness.studies.analytic.roll_flash` holds the classical bounds its queue scheduling
is an instance of. This reads them from each roll-flash run of the study (`step_rows`,
`steady_means`: means over the steps past the first two) and puts beside them the
critical-path bound of `harness.core.metrics` (`lower_bound_s`, from the run's own
group-ready times and train spans) and the round's own time, over the same rounds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SKIP = 2  # the pipeline's fill: steps (rounds) left out, as steady_means leaves them
KEYS = ("step_s", "gen_s", "sync_low_s", "sync_high_s", "async_floor_s", "window_floor_s",
        "critical_path_s", "round_s")


def run_row(folder: str) -> dict[str, Any] | None:
    """One roll-flash run's bounds and times; None for a cell without a trace."""
    from harness.core.metrics import round_metrics
    from harness.core.trace_io import find_trace
    from harness.studies.analytic.roll_flash import steady_means, step_rows
    from harness.studies.staleness.summary import split_label
    from harness.studies.staleness.traces import read_events

    trace = find_trace(folder)
    if not trace.exists():
        return None
    events = read_events(trace)
    config = events[0].get("config") or {}
    means = steady_means(step_rows(events), SKIP)
    rounds = round_metrics(events)
    kept = rounds[SKIP:] or rounds
    return {"split": split_label(config),
            "ratio": float(config["roll_flash"]["async_generation_ratio"]),
            "seed": events[0].get("seed"), **means,
            "critical_path_s": sum(r["lower_bound_s"] for r in kept) / len(kept),
            "round_s": sum(r["rollout_to_train_end_s"] for r in kept) / len(kept)}


def rows(out: Path, jobs: int = 1) -> list[dict[str, Any]]:
    """`run_row` of the study's finished roll-flash cells under OUT/cells."""
    from harness.studies.staleness.forms import read_cells

    return read_cells(out, ["roll-flash"], run_row, jobs)


def by_setting(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per split and ratio: the runs, and the means over them of KEYS."""
    groups: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for r in found:
        groups.setdefault((r["split"], r["ratio"]), []).append(r)
    return [{"split": split, "ratio": ratio, "runs": len(part),
             **{k: sum(r[k] for r in part) / len(part) for k in KEYS}}
            for (split, ratio), part in sorted(groups.items())]
