"""A simulated run's memory and trace size, estimated before it starts.

Why: the simulator keeps every event of a run in memory (the metrics are read from
them at its end) and writes each one to the trace as it goes, so both grow with the
samples a run draws. `run -R 1000000 --rounds 1` was accepted, grew to 21.6 GB and was
killed by the kernel with an 854 MB partial trace behind it. A run that cannot fit is
now refused in one line, with the estimate and the limit, before anything is written.

The per-sample figures were measured on this simulator (`/usr/bin/time -f %M`, the
default system and workload, K = 8, one round; peak resident memory and trace bytes),
on 2026-11-29, after the lean core of #36 (one event heap, traces packed in zstd blocks):

    R      samples   peak RSS   trace (.jsonl.zst)
    32         256   251.1 MB     0.01 MB
    1024     8,192   273.0 MB     0.80 MB
    4096    32,768   320.8 MB     3.31 MB   (plain .jsonl: 43.1 MB, 315.5 MB peak)
    16384  131,072   514.8 MB    13.42 MB

that is about 2.0 KB of memory and 0.10 KB of compressed trace (1.31 KB plain) per
sample above a base of about 255 MB (the interpreter, numpy, pandas, msgspec and the
kernel tables), linear in samples. Before the lean core: 5.0 KB of memory and 1.3 KB
of trace per sample above 60 MB. The figures used below are rounded up so that the
estimate errs toward refusing a run that would only just fit.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.core.config import ConfigError, RunConfig
from harness.core.trace_io import compressed_name, trace_name

BASE_BYTES = 270e6  # the interpreter, the simulator and its tables, before any sample
MEMORY_PER_SAMPLE = 2.5e3  # bytes held per sample drawn (2.0 KB measured, rounded up)
TRACE_PER_SAMPLE = 1.5e3  # plain trace bytes written per sample drawn (1.31 KB measured)
ZST_PER_SAMPLE = 0.15e3  # compressed (trace.jsonl.zst, the simulator's; 0.10 KB measured)
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


def estimate(cfg: RunConfig, compressed: bool = False) -> Footprint:
    """The run's memory and trace size from the measured per-sample figures;
    `compressed`: the trace is written as .jsonl.zst."""
    n = samples_drawn(cfg)
    per_sample = ZST_PER_SAMPLE if compressed else TRACE_PER_SAMPLE
    return Footprint(n, BASE_BYTES + MEMORY_PER_SAMPLE * n, per_sample * n)


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
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.3g} MB"


def shape(cfg: RunConfig) -> str:
    """'-R 32 -K 8 --rounds 4' (the options that set them, as typed: a refusal names
    them), with the over-sampled groups where they are more."""
    return (f"-R {cfg.groups} -K {cfg.group_size} --rounds {cfg.rounds}"
            + (f" (over-sampling {cfg.over_sampling_groups} groups)"
               if (cfg.over_sampling_groups or 0) > cfg.groups else ""))


def memory_room() -> float:
    """The bytes a run may hold: MEMORY_SHARE of what is available now."""
    return MEMORY_SHARE * available_memory()


def check_footprint(cfg: RunConfig, out: Path | None, room: float | None = None,
                    disk: float | None = None, compressed: bool = False) -> Footprint:
    """Refuse (ConfigError, one line) a simulated run whose memory or trace will not fit
    on this machine, with the estimate and the limit; returns the estimate. `out` None:
    no trace is kept (a plan's points write theirs to /dev/null). `room` and `disk`,
    when given, are the limits already read (one reading for a sweep's many cells);
    `compressed`: the trace is written as .jsonl.zst. Each refusal fits 100 columns
    with a typical --out (it ran to 200): the figures only, the usable memory being
    MEMORY_SHARE of what is available."""
    fp = estimate(cfg, compressed)
    if cfg.runtime != "sim":
        return fp
    room = memory_room() if room is None else room
    if fp.memory_bytes > room:
        raise ConfigError(f"{shape(cfg)}: {fp.samples:,} samples need ~{gb(fp.memory_bytes)} "
                          f"of RAM; {gb(room)} usable")
    if out is None:
        return fp
    disk = free_disk(out) if disk is None else disk
    if fp.trace_bytes > disk:
        raise ConfigError(f"--out {out}: ~{gb(fp.trace_bytes)} trace for {shape(cfg)}; "
                          f"{gb(disk)} free")
    return fp


def check_jobs(held: Sequence[float], jobs: int, what: str, room: float) -> None:
    """Refuse `jobs` runs at once whose memory (`held`, the most each may hold, largest
    first) is more than `room` together, naming the most that fit at once; each was
    checked alone already, so one always fits."""
    together = list(held[:jobs])
    if len(together) < 2 or sum(together) <= room:
        return
    fit = max(k for k in range(1, len(together) + 1) if sum(together[:k]) <= room)
    raise ConfigError(f"--jobs {jobs}: {what} at once need ~{gb(sum(together))} of RAM; "
                      f"{gb(room)} usable: -j {fit} fits")


def check_cells(named: Sequence[tuple[str, RunConfig]], out: Path, jobs: int,
                memory: bool = True) -> None:
    """Several runs that keep their traces under `out` (a sweep's cells), `jobs` at a
    time: each as `check_footprint` checks it alone (ConfigError naming it), then the
    `jobs` largest together against the memory (unless `memory` is False: they run
    elsewhere) and every trace together against the disk."""
    room = memory_room() if memory else math.inf
    disk = free_disk(out)
    prints = []
    for name, cfg in named:
        try:
            fp = check_footprint(cfg, out, room, disk,  # the trace name a cell writes
                                 compressed=compressed_name(trace_name(cfg.runtime)))
        except ConfigError as err:
            raise ConfigError(f"{name}: {err}") from None
        if cfg.runtime == "sim":
            prints.append(fp)
    held = sorted((fp.memory_bytes for fp in prints), reverse=True)
    check_jobs(held, jobs, f"the {min(jobs, len(held))} largest cells", room)
    written = sum(fp.trace_bytes for fp in prints)
    if written > disk:
        raise ConfigError(f"--out {out}: {len(prints)} cells' traces need ~{gb(written)}; "
                          f"{gb(disk)} free there")
