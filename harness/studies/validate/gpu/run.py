"""`rolloutbench validate gpu`: the five checks in one folder, with one summary."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from harness.core.files import write_atomic
from harness.studies.validate.gpu import appendix_a, models, silicon, timed_report, trainer_check


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
    trainer_check.md) and write summary.md."""
    out.mkdir(parents=True, exist_ok=True)
    parts = ["# The simulated GPU against measurements\n"]
    start = time.perf_counter()
    log("1/5 the step models against aiconfigurator-core's measured serving latencies")
    parts += ["## Against measured serving latencies (silicon.csv)\n",
              silicon.summary(silicon.compare(out)) + "\n"]
    log("2/5 the roofline against the measured kernels, every model and GPU preset")
    parts += ["## Roofline against measured kernels (models.csv)\n",
              models.summary(models.grid(out)) + "\n"]
    log("3/5 PipelineRL's Appendix A with a measured U(h)")
    parts += ["## PipelineRL Appendix A with a measured U(h) (appendix_a.csv)\n",
              appendix_summary(appendix_a.rederive(out))]
    log("4/5 both step models and the database against steps timed on a GPU (measurements/)")
    parts += ["## Timed on a GPU with torch (timed_*.csv, timed.png)\n",
              timed_report.report(out)]
    log("5/5 Megatron training timed on an H100 against the trainer model (measurements/)")
    parts += ["## Megatron training timed on a GPU (trainer_check.md)\n",
              trainer_check.summary(out)]
    text = "\n".join(parts)
    write_atomic(out / "summary.md", text)
    log(f"wrote {out}/summary.md ({time.perf_counter() - start:.0f} s)")
    return text
