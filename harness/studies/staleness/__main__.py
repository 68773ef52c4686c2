"""`python -m harness.studies.staleness runs/whatif/staleness/summary.csv`: the answer
and the condensed summary as Markdown tables (what docs/whatif/staleness.md quotes)."""

from __future__ import annotations

import sys

import pandas as pd

from harness.studies.staleness.summary import markdown

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m harness.studies.staleness SUMMARY.csv")
    try:
        table = pd.read_csv(sys.argv[1])
    except (OSError, ValueError) as err:
        sys.exit(f"{sys.argv[1]}: {err}")
    print(markdown(table), end="")
