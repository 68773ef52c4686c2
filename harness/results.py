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
import tempfile
from pathlib import Path
from typing import Any

from harness import __version__
from harness.config import RunConfig
from harness.metrics import ROUND_METRIC_EVENTS, round_metrics
from harness.trace import read_trace


def _git(*args: str) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=Path(__file__).parent, capture_output=True,
                             text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def git_commit() -> str:
    """The commit of the checkout the package runs from ('-dirty' when the code has
    uncommitted changes), or 'unknown' outside a git checkout."""
    commit = _git("rev-parse", "HEAD")
    if not commit:
        return "unknown"
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", ":/harness",
                 ":/systems", ":/workloads")
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
    """Fill the fields whose default depends on the workload (the response cap) or on
    the system (its paper's settings of its own knobs, e.g. APRIL's 2R over-sampling),
    so the trace header says what ran."""
    from systems import SYSTEMS

    paper_defaults = getattr(SYSTEMS.get(cfg.system), "paper_defaults", None)
    if paper_defaults is not None:
        paper_defaults(cfg)
    if cfg.over_sampling_groups is None:  # a system that does not over-sample: none
        cfg.over_sampling_groups = 0
    if cfg.max_response_tokens == 0:
        if cfg.runtime == "live" and cfg.live.lengths != "replay":
            cfg.max_response_tokens = LIVE_RESPONSE_CAP
        else:  # the simulator, or a live run replaying the workload's lengths
            from workloads.profile import workload_limits

            cfg.max_response_tokens = workload_limits(cfg.workload, cfg.group_size)[0]
    return cfg


def _run_live(cfg: RunConfig, trace_path: str | os.PathLike[str], system: Any) -> None:
    """A live run: the engine's and libraries' logs to RUN_FOLDER/engine.log, one
    line (piped) or a spinner (terminal) per stage on stderr."""
    from harness.live.logs import engine_log
    from harness.live.watch import TraceFollower
    from harness.progress import say, stage

    label = f"live {cfg.system}"
    with engine_log(Path(trace_path).parent / "engine.log"), \
            stage(f"{label}: starting" + (" Ray" if cfg.live.ray_address != "off" else "")
                  ) as update:
        follower = TraceFollower(trace_path, label, cfg.rounds, update, say)
        follower.start()
        try:
            if cfg.live.ray_address == "off":
                from harness.live.runtime import LiveRuntime

                LiveRuntime(cfg, trace_path).run(system)
            else:
                from harness.live.ray_actors import run_on_ray

                run_on_ray(cfg, trace_path, system)
        finally:
            follower.stop()


def execute(cfg: RunConfig, trace_path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Run one configuration on its runtime, writing the trace; returns its metrics."""
    from systems import get_system

    system = get_system(cfg.system)
    resolve_defaults(cfg)
    Path(trace_path).unlink(missing_ok=True)
    if cfg.runtime == "sim":
        from harness.sim.runtime import SimRuntime

        runtime = SimRuntime(cfg, trace_path)
        runtime.run(system)
        return round_metrics(runtime.events(ROUND_METRIC_EVENTS))
    elif cfg.runtime == "live":
        from harness.live import backends

        backends.check(cfg)
        _run_live(cfg, trace_path, system)
    else:  # validated earlier; kept for a clear message if called directly
        raise ValueError(f"runtime {cfg.runtime!r} is not available")
    return round_metrics(read_trace(trace_path))
