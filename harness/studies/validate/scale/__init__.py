"""`rolloutbench validate scale`: every external GPU measurement the project holds, in one table.

Why: each check of the simulated GPU (the serving latencies, the trainer, weight sync, verl's
and AReaL's published runs) reports on its own, in its own units and its own split of fitted
and held-out rows, so nobody can say how far the simulator is from real GPUs overall, or
whether a good number is a fit. This table puts every measured row beside its prediction with
one error rule (predicted / measured - 1), marks the rows a fit saw, and summarises per source
and pooled with the fitted rows counted apart.

- `rows`: the row schema and the summary;
- `sources`: one reader per source, each saying which rows its fit saw;
- `report`: the markdown and the CSV.
"""

from harness.studies.validate.scale.report import validate_scale

__all__ = ["validate_scale"]
