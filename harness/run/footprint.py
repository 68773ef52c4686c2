"""A simulated run's memory and trace size, estimated before it starts.

Why: the simulator keeps every event of a run in memory (the metrics are read from
them at its end) and writes each one to the trace as it goes, so both grow with the
samples a run draws. `run -R 1000000 --rounds 1` was accepted, grew to 21.6 GB and was
killed by the kernel with an 854 MB partial trace behind it. A run that cannot fit is
now refused in one line, with the estimate and the limit, before anything is written.

The per-sample figures were measured on this simulator (`/usr/bin/time -f %M`, the
default system and workload, K = 8, one round; peak resident memory and trace bytes):

    R      samples   peak RSS   trace
    32         256    61.2 MB    0.10 MB
    256      2,048    70.6 MB    2.04 MB
    1024     8,192   101.7 MB   10.08 MB
    4096    32,768   224.2 MB   43.28 MB

that is about 5.0 KB of memory and 1.3 KB of trace per sample above a 60 MB base,
linear in samples (R = 256 with K = 32, or with 4 rounds, lands on the same line).
The figures used below are rounded up so that the estimate errs toward refusing a
run that would only just fit.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from harness.core.config import ConfigError, RunConfig

BASE_BYTES = 60e6  # the interpreter, the simulator and its tables, before any sample
MEMORY_PER_SAMPLE = 6e3  # bytes held per sample drawn (5.0 KB measured, rounded up)
TRACE_PER_SAMPLE = 1.5e3  # trace bytes written per sample drawn (1.3 KB measured)
MEMORY_SHARE = 0.8  # of the memory available now: the rest for everything else


@dataclass(frozen=True)
class Footprint:
    """What a run is expected to draw, hold and write."""

    samples: int
    memory_bytes: float
    trace_bytes: float


def groups_per_round(cfg: RunConfig) -> int:
    """The most groups a round draws: R, or the over-sampled groups in flight (APRIL's
    `over_sampling_groups`) where larger. The memory estimate, the trace-length check
    and the engine-count check all bound a run by it."""
    return max(cfg.groups, cfg.over_sampling_groups or 0)


def samples_drawn(cfg: RunConfig) -> int:
    """Samples a run draws: K per group, `groups_per_round` groups, every round."""
    return groups_per_round(cfg) * cfg.group_size * cfg.rounds


def estimate(cfg: RunConfig) -> Footprint:
    """The run's memory and trace size from the measured per-sample figures."""
    n = samples_drawn(cfg)
    return Footprint(n, BASE_BYTES + MEMORY_PER_SAMPLE * n, TRACE_PER_SAMPLE * n)


def available_memory() -> float:
    """Bytes of memory available to a new process now (MemAvailable on Linux; the
    physical memory elsewhere, where no better figure is at hand)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return float("inf")


def free_disk(path: Path) -> float:
    """Free bytes on the disk that would hold `path` (its nearest existing folder)."""
    where = path.absolute()
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        return float(shutil.disk_usage(where).free)
    except OSError:
        return float("inf")


def gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def check_footprint(cfg: RunConfig, out: Path) -> Footprint:
    """Refuse (ConfigError, one line) a simulated run whose memory or trace will not fit
    on this machine, with the estimate and the limit; returns the estimate."""
    fp = estimate(cfg)
    if cfg.runtime != "sim":
        return fp
    shape = (f"-R {cfg.groups} x K {cfg.group_size} x {cfg.rounds} round(s)"
             + (f" (over-sampling {cfg.over_sampling_groups} groups)"
                if (cfg.over_sampling_groups or 0) > cfg.groups else ""))
    room = MEMORY_SHARE * available_memory()
    if fp.memory_bytes > room:
        raise ConfigError(
            f"{shape}: {fp.samples:,} samples would hold about {gb(fp.memory_bytes)} in "
            f"memory ({MEMORY_PER_SAMPLE / 1e3:g} KB each); this machine has "
            f"{gb(room)} to give ({MEMORY_SHARE:.0%} of what is available): lower -R, -K "
            f"or --rounds")
    disk = free_disk(out)
    if fp.trace_bytes > disk:
        raise ConfigError(
            f"{shape}: {fp.samples:,} samples would write a trace of about "
            f"{gb(fp.trace_bytes)} ({TRACE_PER_SAMPLE / 1e3:g} KB each); --out {out} has "
            f"{gb(disk)} free: lower -R, -K or --rounds, or give another --out")
    return fp
