"""Running one configuration, and writing result files safely.

Result files are written to a temporary name and renamed, so a reader never
sees half a file; every result records its config, seed, package version and
git commit.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness import __version__
from harness.config import RunConfig
from harness.metrics import round_metrics
from harness.trace import read_trace


def _git(*args: str) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=Path(__file__).parent, capture_output=True,
                             text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def git_state() -> tuple[str, bool]:
    """The commit of the checkout the package runs from ('unknown' outside a git
    checkout) and whether the code that makes results (harness, systems, workloads)
    has uncommitted changes: a result made from a dirty tree is not that commit's."""
    commit = _git("rev-parse", "HEAD")
    if not commit:
        return "unknown", False
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", ":/harness",
                 ":/systems", ":/workloads")
    return commit, bool(dirty)


def git_commit() -> str:
    """The commit as one string, with '-dirty' when the code has uncommitted changes."""
    commit, dirty = git_state()
    return f"{commit}-dirty" if dirty else commit


def provenance(**extra: Any) -> dict[str, Any]:
    return {"version": __version__, "commit": git_commit(), **extra}


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a result is for sharing
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _clean(value: Any) -> Any:
    """NaN is not JSON: write null instead."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def dump_json(obj: Any) -> str:
    if isinstance(obj, list):
        obj = [{k: _clean(v) for k, v in row.items()} if isinstance(row, dict) else row
               for row in obj]
    return json.dumps(obj, indent=2) + "\n"


LIVE_RESPONSE_CAP = 256  # the tiny live model's default response cap


def resolve_defaults(cfg: RunConfig) -> RunConfig:
    """Fill the fields whose default depends on the workload (the response cap)."""
    if cfg.max_response_tokens == 0:
        if cfg.runtime == "live" and cfg.live.lengths != "replay":
            cfg.max_response_tokens = LIVE_RESPONSE_CAP
        else:  # the simulator, or a live run replaying the workload's lengths
            from workloads.profile import workload_limits

            cfg.max_response_tokens = workload_limits(cfg.workload, cfg.group_size)[0]
    return cfg


_SAID: list[bool] = []


def _say_not_applicable() -> None:
    """Once per process: what one live engine cannot do (the trace records it per run)."""
    if not _SAID:
        from harness.live.engine import NOT_APPLICABLE

        _SAID.append(True)
        print("live: not modelled on one live engine (recorded in the trace when a system "
              "asks): " + "; ".join(NOT_APPLICABLE.values()), file=sys.stderr)


def execute(cfg: RunConfig, trace_path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Run one configuration on its runtime, writing the trace; returns its metrics."""
    from systems import get_system

    system = get_system(cfg.system)
    resolve_defaults(cfg)
    Path(trace_path).unlink(missing_ok=True)
    if cfg.runtime == "sim":
        from harness.sim.runtime import SimRuntime

        SimRuntime(cfg, trace_path).run(system)
    elif cfg.runtime == "live":
        from harness.live import backends

        backends.check(cfg)
        _say_not_applicable()
        if cfg.live.ray_address == "off":
            from harness.live.runtime import LiveRuntime

            LiveRuntime(cfg, trace_path).run(system)
        else:
            from harness.live.ray_actors import run_on_ray

            run_on_ray(cfg, trace_path, system)
    else:  # validated earlier; kept for a clear message if called directly
        raise ValueError(f"runtime {cfg.runtime!r} is not available")
    return round_metrics(read_trace(trace_path))
