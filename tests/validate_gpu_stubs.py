"""Stand-ins for the `validate gpu` checks that read the kernel database for minutes
(silicon's summary, the closed loop, the model grid, Appendix A, the timed report), shared
by the tests of the parts that run for real."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.studies.validate.gpu import run as gpu_run


def stand_in_slow_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each slow check returns a one-word summary or nothing (silicon's compare is the
    caller's: one test records its calls)."""
    monkeypatch.setattr(gpu_run.silicon, "summary", lambda table: "silicon")
    monkeypatch.setattr(gpu_run.closed_loop, "write", lambda table, out: None)
    monkeypatch.setattr(gpu_run.models, "grid", lambda out: None)
    monkeypatch.setattr(gpu_run.models, "summary", lambda table: "models")
    monkeypatch.setattr(gpu_run.appendix_a, "rederive", lambda out: pd.DataFrame(
        columns=["u_model", "speedup", "g_max", "H", "I", "U_H"]))
    monkeypatch.setattr(gpu_run.timed_report, "report", lambda out: "timed\n")
