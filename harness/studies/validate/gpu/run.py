"""`rolloutbench validate gpu`: the eight checks in one folder, with one summary."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from harness.core.files import write_atomic
from harness.studies.validate.gpu import (
    appendix_a,
    models,
    silicon,
    sim_parts,
    timed_report,
    trainer_bench,
    trainer_check,
)
from harness.studies.validate.gpu.silicon import closed_loop


def appendix_summary(table: pd.DataFrame) -> str:
    """The re-derived optimum beside the paper's and the roofline's."""
    lines = ["| U(h) | speedup | g_max | H | I | U(H) |", "|---|---|---|---|---|---|"]
    for _, r in table.iterrows():
        u = "" if pd.isna(r["U_H"]) else f"{r['U_H']:.3f}"
        lines.append(f"| {r['u_model']} | {r['speedup']:.3g} | {r['g_max']:.0f} | "
                     f"{r['H']:.0f} | {r['I']:.0f} | {u} |")
    return "\n".join(lines) + "\n"


def validate_gpu(out: Path, log: Callable[[str], None] = print) -> str:
    """Run the checks into OUT (silicon.*, models.*, appendix_a.*, timed_*,
    trainer_check.md, overhead.md, mixed_prefill.*, weight_sync.md) and write summary.md."""
    out.mkdir(parents=True, exist_ok=True)
    parts = ["# The simulated GPU against measurements\n"]
    start = time.perf_counter()
    log("1/8 the step models against aiconfigurator-core's measured serving latencies")
    table = silicon.compare(out)
    parts += ["## Against measured serving latencies (silicon.csv)\n",
              silicon.summary(table) + "\n"]
    closed_loop.write(table, out)  # the replay the summary ran, row by row
    log("2/8 the roofline against the measured kernels, every model and GPU preset")
    parts += ["## Roofline against measured kernels (models.csv)\n",
              models.summary(models.grid(out)) + "\n"]
    log("3/8 PipelineRL's Appendix A with a measured U(h)")
    parts += ["## PipelineRL Appendix A with a measured U(h) (appendix_a.csv)\n",
              appendix_summary(appendix_a.rederive(out))]
    log("4/8 both step models and the database against steps timed on a GPU (measurements/)")
    parts += ["## Timed on a GPU with torch (timed_*.csv, timed.png)\n",
              timed_report.report(out)]
    log("5/8 training timed on GPUs (measurements/) against both trainer models")
    parts += ["## Megatron training timed on a GPU (trainer_check.md)\n",
              trainer_check.summary(out, more_report=trainer_bench.report(),
                                    more_lines=trainer_bench.summary_lines())]
    log("6/8 the serving framework's per-step cost, fitted and held out (silicon rows)")
    parts += ["## Per-step framework cost (overhead.md)\n", sim_parts.overhead_part(out, table)]
    log("7/8 separate prefill against prefill mixed into decode steps")
    parts += ["## Separate vs mixed prefill (mixed_prefill.md)\n",
              sim_parts.mixed_prefill_part(out, table)]
    log("8/8 weight publication against verl's published sync times")
    parts += ["## Weight publication (weight_sync.md)\n", sim_parts.weight_sync_part(out)]
    text = "\n".join(parts)
    write_atomic(out / "summary.md", text)
    log(f"wrote {out}/summary.md ({time.perf_counter() - start:.0f} s)")
    return text
