"""Golden traces: a small run of every system must not change silently.

When a change is meant to move a trace, regenerate with
`ROLLOUTBENCH_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden.py`
and say why in the commit message.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.core.config import RunConfig
from harness.run.execute import execute
from systems import checked_names

GOLDEN = Path(__file__).parent / "golden"


def golden_config(system: str) -> RunConfig:
    """The run whose trace is `system`'s golden (other tests run it too)."""
    cfg = RunConfig(system=system, workload="sci-jl", groups=8, rounds=2, seed=7)
    if system == "seer":  # chunks shorter than sci-jl's 8192-token cap, so that it has some
        cfg.seer.chunk_tokens = 2048
    if system == "tlt":  # a drifting drafter retrained every step (no step needed: 1 replica)
        cfg.sim.spec_acceptance_decay, cfg.tlt.training_interval_steps = 0.05, 1
        cfg.tlt.drafter_steps = 0
    return cfg.validate()


# The built-in systems, and an installed plugin only when it opts in
# (ROLLOUTBENCH_CHECK_PLUGINS, systems.plugins): it has no golden trace here otherwise.
@pytest.mark.parametrize("system", checked_names())
def test_trace_matches_golden(system: str, tmp_path: Path) -> None:
    cfg = golden_config(system)
    trace = tmp_path / "trace.jsonl"
    execute(cfg, trace)
    golden = GOLDEN / f"{system}.jsonl"
    if os.environ.get("ROLLOUTBENCH_UPDATE_GOLDEN"):
        golden.write_bytes(trace.read_bytes())
    assert golden.exists(), f"no golden trace for {system}: run with ROLLOUTBENCH_UPDATE_GOLDEN=1"
    got, want = trace.read_text().splitlines(), golden.read_text().splitlines()
    for i, (a, b) in enumerate(zip(got, want, strict=False), start=1):
        assert a == b, f"{system}: trace differs from golden at line {i}"
    assert len(got) == len(want), f"{system}: {len(got)} lines, golden has {len(want)}"
