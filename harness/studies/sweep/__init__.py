"""Parameter sweeps: a TOML spec expands to cells (one resolved RunConfig each),
run in parallel on local processes or a Ray cluster, resumable, and gathered
into one table (DIR/results.parquet and DIR/results.csv).

A cell's directory is named by a hash of its resolved config, so rerunning a
spec (or a widened one) finds the cells already done and runs only the rest.
Spec mistakes (unknown keys, wrong types, any cell `run` would refuse: a system typo, an
unknown preset, U not dividing R, too large for memory or disk) stop the sweep before anything
runs; a cell that fails while running is recorded with its error and the sweep goes on.
`repeats = N` runs seeds 0..N-1 (overriding base.seed); without it the base seed.

Modules: `spec` (the spec and its cells), `running` (the cells run, locally or on Ray),
`results` (each cell's result file and the table of all).
"""

from harness.studies.sweep.results import (
    foreign_cells,
    pending,
    read_result,
    record,
    table_rows,
    write_tables,
)
from harness.studies.sweep.running import check_footprints, rows_delivered, run_cell, run_sweep
from harness.studies.sweep.spec import (
    Cell,
    Sweep,
    ignored_by_cells,
    load_spec,
    make_cell,
    parse_spec,
)

__all__ = ["Cell", "Sweep", "check_footprints", "foreign_cells", "ignored_by_cells",
           "load_spec", "make_cell", "parse_spec", "pending", "read_result", "record",
           "rows_delivered", "run_cell", "run_sweep", "table_rows", "write_tables"]
