"""Analysis of traces and result sets: a Perfetto timeline, a Gantt figure of one
round, a metric-by-metric comparison of two runs, and sweep plots.

Everything here reads only the trace (or tables of metrics computed from traces),
so simulated, live and converted traces are analysed alike. The command line is in
`harness.cli.analysis`.
"""

from __future__ import annotations


class InputError(ValueError):
    """An input the analysis cannot use; the message is one line that names it."""
