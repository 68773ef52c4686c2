"""Three more parts of `validate gpu`: the serving framework's per-step cost, separate
against mixed prefill, and weight publication against published sync times.

Why here: each was a `python -m ...` study whose table nobody saw unless they ran it. As
parts of `validate gpu` each writes its table into the output folder beside the others and
adds one summary line. The first two reuse the silicon comparison part 1 already made
(`silicon.compare`'s table), so the sample is read once.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd

from harness.core.files import write_atomic
from harness.studies.validate import weight_sync
from harness.studies.validate.gpu import mixed_prefill, overhead
from harness.studies.validate.gpu.silicon import fit_rows
from harness.studies.validate.gpu.silicon.bins import LOAD_BINS

SUMMARY_BUDGET = mixed_prefill.BUDGETS[0]  # the token budget the summary line quotes


def overhead_part(out: Path, table: pd.DataFrame) -> str:
    """Write overhead.md (the fitted per-step term and its held-out errors); return the
    summary line: held-out median |TPOT error| of the kernels before -> after the term."""
    write_atomic(out / "overhead.md", overhead.report(table) + "\n")
    fit_rows, held_rows = overhead.split(table)
    held = overhead.with_overhead(overhead.fit(table), held_rows)
    before, after = held["err_before"].abs().median(), held["err_after"].abs().median()
    return (f"overhead.md: fitted on {len(fit_rows)} dense BF16 rows; {len(held)} held out, "
            f"median |TPOT error| {before:.1%} -> {after:.1%}\n")


def mixed_prefill_part(out: Path, table: pd.DataFrame) -> str:
    """Write mixed_prefill.csv and .md (both forms on the dense BF16 silicon rows and
    RolloutPipe's engines); return the summary line: separate / mixed - 1 at the first
    budget, median per prefill-load bin over every shape."""
    with tempfile.TemporaryDirectory() as tmp:
        df = mixed_prefill.compare(fit_rows.basis(table), Path(tmp))
    write_atomic(out / "mixed_prefill.csv", df.to_csv(index=False))
    write_atomic(out / "mixed_prefill.md", mixed_prefill.report(df) + "\n")
    cells = [f"{label} {df.loc[df['bin'] == label, f'diff_{SUMMARY_BUDGET}'].median():+.1%}"
             for _, label in LOAD_BINS if (df["bin"] == label).any()]
    return (f"mixed_prefill.md: separate / mixed - 1 at C={SUMMARY_BUDGET}, median by prompt "
            f"tokens a step: {', '.join(cells)}\n")


def weight_sync_part(out: Path) -> str:
    """Write weight_sync.md (the transfer model against published sync times, fitted and
    held out); return the summary line: median and worst error of each set."""
    write_atomic(out / "weight_sync.md", weight_sync.report())
    return weight_sync.headline()
