"""`python -m harness.studies.staleness runs/whatif/staleness/summary.csv`: the answer
and the condensed summary as Markdown tables, then why (harness.studies.staleness.why):
what docs/whatif/staleness.md quotes, and what the study writes to summary.md."""

from __future__ import annotations

import sys

import pandas as pd

from harness.studies.staleness.why import NEEDED, report

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m harness.studies.staleness SUMMARY.csv")
    try:
        table = pd.read_csv(sys.argv[1])
    except (OSError, ValueError) as err:
        sys.exit(f"{sys.argv[1]}: {err}")
    missing = [c for c in NEEDED if c not in table.columns]
    if missing:  # a summary written before a figure was added: one line, exit 2
        print(f"{sys.argv[1]}: no column {', '.join(missing)} (written by an older "
              "rolloutbench? run the study again)", file=sys.stderr)
        sys.exit(2)
    print(report(table), end="")
