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
from harness.run.execute import execute
from harness.sim.knobs import active
from harness.studies.reproduce.april.claims import GENERATED, TABLE1, gains
from harness.studies.reproduce.april.runs import DATASETS, PAPER, ROUNDS, config, steady
from harness.studies.reproduce.family import TRACES, Family, Miss, SmallBatchStep

GRPO_CARRIED = "carried-over token share % (GRPO)"


class AprilGain(SmallBatchStep):
    """APRIL's gain is the baseline's tail: the last few sequences of each engine
    decode at a small batch while the rest of the GPU idles."""

    paper = PAPER
    claims = ("APRIL throughput gain %", "APRIL throughput gain %" + GENERATED,
              "mean throughput gain %", "mean throughput gain %" + GENERATED,
              GRPO_CARRIED)
    lo, hi = 0.15, 4.0
    REFERENCE = ("grpo", "qwen3-4b", "dapo-math-17k")

    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[tuple[tuple[str, str, str], float], pd.DataFrame] = {}

    def group(self, m: Miss) -> Hashable:
        if m.claim == GRPO_CARRIED:
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
                    cfg = config(algo, model, dataset, method == "april", 0, ROUNDS)
                    rows = execute(cfg, TRACES / "april" / f"{method}.jsonl")
                    frames.append(pd.DataFrame(rows).assign(algo=algo, model=model,
                                                            method=method))
            self.cells[(cell, x)] = steady(pd.concat(frames, ignore_index=True))
        return self.cells[(cell, x)]

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, str], float]:
        cells = [(a, m, d) for (a, m) in TABLE1 for d in DATASETS]
        out: dict[tuple[str, str], float] = {}
        if group == "grpo":
            carried = [self._cell(c, x).loc[(*c, "april"), "carried"] for c in cells
                       if c[0] == "grpo"]
            return {(GRPO_CARRIED, "steady rounds"): 100 * sum(carried) / len(carried)}
        for cell in cells if group == "all" else [group]:  # type: ignore[list-item]
            gain, gain_b = gains(self._cell(cell, x), *cell)
            out[("APRIL throughput gain %", " ".join(cell))] = gain
            out[("APRIL throughput gain %" + GENERATED, " ".join(cell))] = gain_b
        if group == "all":
            for claim in ("APRIL throughput gain %", "APRIL throughput gain %" + GENERATED):
                vals = [v for (c, _), v in out.items() if c == claim]
                out[(claim.replace("APRIL", "mean"), "12 cells")] = sum(vals) / len(vals)
        # cells evaluated for "all" serve the cell searches too
        for cell in cells if group == "all" else []:
            key = " ".join(cell)
            self.cache.setdefault(cell, {})[x] = {k: v for k, v in out.items() if k[1] == key}
        return out

    def reference(self, m: Miss) -> RunConfig:
        group = self.group(m)
        algo, model, dataset = group if isinstance(group, tuple) else self.REFERENCE
        return config(algo, model, dataset, True, 0, ROUNDS)


# The families, in the order their searches run.
FAMILIES: tuple[type[Family], ...] = (AprilGain,)
