"""What-if: every system's throughput against its staleness (`rolloutbench whatif staleness`).

One long-tailed workload on one cluster of GPUs split between engine and trainer in
a few ways; every synchronous and asynchronous system, each at several settings of
the knob that sets its staleness (`grid`); throughput, lag, ESS, idle shares,
backlog and drops read from each run's trace over a steady window (`traces`),
taken over seeds per setting with the Pareto frontier and the best setting within
each bound on the lag (`summary`), explained from those figures and set against the
synchronous baseline (`why`: written to summary.md by every run), and drawn (`plot`).
docs/whatif/staleness.md reads the result.
"""

from __future__ import annotations

from harness.studies.staleness.grid import expand
from harness.studies.staleness.plot import draw
from harness.studies.staleness.summary import answer, runs, summarise
from harness.studies.staleness.why import report

QUESTION = ("Which staleness rule trains the most tokens per second at a given lag, "
            "and why (idle shares, backlog, lag from the traces)")

__all__ = ["QUESTION", "answer", "draw", "expand", "report", "runs", "summarise"]
