"""What the reproduction's workers would each import for their first run, imported once
in the parent before it forks them (`pool.reproduce_passes`)."""

from __future__ import annotations

import importlib
import importlib.util
import os

# What every worker imports for its first run (the simulated runtime, the systems, the
# workload profiles); the compiled core's (numba's) where runs may take it.
PRELOAD = ("harness.run.execute", "harness.sim.runtime", "systems", "workloads.profile",
           "workloads.trace_source", "workloads.own_jsonl")
CORE = "harness.sim.fastcore.pool"


def preload() -> list[str]:
    """Import here, before the workers fork, the modules each would import for its first
    run: a forked worker inherits them, so they are imported once, not once a worker
    (numba and the compiled core alone: about 1.1 CPU s a worker). The core only where a
    run could take it (numba installed, the Python engines not forced: `choice`). Done
    before `_frozen`, so that the collector's full passes in the workers skip them too.
    Returns the modules imported."""
    from harness.sim.fastcore.choice import FORCE_PYTHON

    names = list(PRELOAD)
    if os.environ.get(FORCE_PYTHON, "0") in ("", "0") and importlib.util.find_spec("numba"):
        names.append(CORE)
    for name in names:
        importlib.import_module(name)
    return names
