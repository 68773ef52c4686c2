"""APRIL's family of the would-need search: what its missed gains need.

APRIL's gain is the baseline's tail: the last few sequences of each engine
decode at a small batch while the rest of the GPU idles, so the knob is the
engine's small-batch speed (`SmallBatchStep`). A search re-runs the Table 1
cells (baseline and APRIL) exactly as the claims table does, so at the neutral
knob it gives the table's value; the cells run for the 12-cell mean serve the
searches of single cells too.
"""

from __future__ import annotations

from collections.abc import Hashable

import pandas as pd

from harness.core.config import RunConfig
from harness.core.trace_io import trace_file
from harness.run.execute import execute
from harness.sim.knobs import active
from harness.studies.reproduce.april import runs
from harness.studies.reproduce.april.claims import CARRIED, GAIN, MEAN_GAIN, TABLE1, gains
from harness.studies.reproduce.april.claims import carried_shares as shares
from harness.studies.reproduce.family import TRACES, Family, Miss, SmallBatchStep


class AprilGain(SmallBatchStep):
    """APRIL's gain is the baseline's tail: the last few sequences of each engine
    decode at a small batch while the rest of the GPU idles."""

    paper = runs.PAPER
    claims = (GAIN, MEAN_GAIN, CARRIED)
    lo, hi = 0.15, 4.0
    REFERENCE = ("grpo", "qwen3-4b", "dapo-math-17k")

    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[tuple[tuple[str, str, str], float], pd.DataFrame] = {}

    def group(self, m: Miss) -> Hashable:
        if m.claim == CARRIED:
            return "grpo"
        return "all" if m.config == "12 cells" else tuple(m.config.split())

    def order(self, m: Miss) -> int:
        return {"all": 0, "grpo": 1}.get(self.group(m), 2)  # type: ignore[arg-type]

    def _cell(self, cell: tuple[str, str, str], x: float) -> pd.DataFrame:
        """`steady` of one Table 1 cell (baseline and APRIL) at scale x."""
        if (cell, x) not in self.cells:
            algo, model, dataset = cell
            frames = []
            (TRACES / "april").mkdir(parents=True, exist_ok=True)
            with active(self.knobs(x)):
                for method in ("baseline", "april"):
                    cfg = runs.config(algo, model, dataset, method == "april", 0, runs.ROUNDS)
                    rows = execute(cfg, trace_file(TRACES / "april", method), runs.round_rows)
                    frames.append(pd.DataFrame(rows).assign(algo=algo, model=model,
                                                            method=method))
            self.cells[(cell, x)] = runs.steady(pd.concat(frames, ignore_index=True))
        return self.cells[(cell, x)]

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, str, str], float]:
        """The group's claims at scale x, keyed (claim, config, reading): the carried-over
        share under its three readings, or the gains (one reading each)."""
        cells = [(a, m, d) for (a, m) in TABLE1 for d in runs.DATASETS]
        if group == "grpo":
            grpo = [c for c in cells if c[0] == "grpo"]
            frame = pd.concat([self._cell(c, x).loc[[(*c, "april")]] for c in grpo])
            return {(CARRIED, "steady rounds", reading): value
                    for reading, value in shares(frame).items()}
        out: dict[tuple[str, str, str], float] = {}
        for cell in cells if group == "all" else [group]:  # type: ignore[list-item]
            out[(GAIN, " ".join(cell), "")] = gains(self._cell(cell, x), *cell)
        if group == "all":
            out[(MEAN_GAIN, "12 cells", "")] = sum(out.values()) / len(out)
        # cells evaluated for "all" serve the cell searches too
        for cell in cells if group == "all" else []:
            key = " ".join(cell)
            self.cache.setdefault(cell, {})[x] = {k: v for k, v in out.items() if k[1] == key}
        return out

    def reference(self, m: Miss) -> RunConfig:
        group = self.group(m)
        algo, model, dataset = group if isinstance(group, tuple) else self.REFERENCE
        return runs.config(algo, model, dataset, True, 0, runs.ROUNDS)


# The families, in the order their searches run.
FAMILIES: tuple[type[Family], ...] = (AprilGain,)
