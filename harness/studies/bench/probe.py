"""What `make bench` times inside a child Python, in this tree or in the base commit's.

This file runs as a script (`runpy`) in a child whose PYTHONPATH is one tree's root, so
it must work against any commit's `harness`: it imports only the standard library at the
top, and inside each probe only what both trees have (the reproductions' `runs`, the grid
runner's `pool.run_one`, `execute`). Imports and a small warm-up run come before the
clock starts: what is timed is the simulation, not loading the code. Each probe prints
one JSON line (the last line of stdout), which `trees.Tree.probe` returns.

Requests are counted where the runs leave them, after the clock stops: a written run's
`request_submit` lines in its trace file (plain or zstd, by its first bytes: the grid,
the R and K table), and a memory-only run's (verl-async's) from its events in memory,
in a second pass of the same runs that is not timed: every such run goes through
`pool.run_one`, which this file wraps so that the run's reader also counts the
`request_submit` events it is handed. That is one kind more than verl-async's summary
reads, which a tree that keeps only the kinds its reader asks for (#36) would otherwise
make, hold and hand over in the timed pass alone (a Struct, a packed line and a dict a
request, which `reproduce` never makes). Neither changes what a written run's metrics
cost: a tree that makes them as the run goes decodes nothing of its trace.
"""

from __future__ import annotations

import contextlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"  # the first bytes of a zstd frame
# verl-async's runs timed for CPU per request: the README table's 7B rows (colocated and
# fully async at the three sizes), the 30B fully-async run and one-step-off (FSDP2), all
# in the main reading (lengths from gen): 8 of its 20 runs, about 20 s at fdfe2fa
VERL_LABELS = ("colocate 32", "colocate 64", "colocate 128", "fully async 16:16",
               "fully async 32:32", "fully async 64:64", "30B fully async 96:32",
               "one-step-off 4:12 FSDP2")


def trace_requests(path: Path) -> int:
    """`request_submit` lines of a trace file, plain jsonl or zstd-compressed (by its
    first bytes, not its name): how the written runs' requests are counted."""
    with path.open("rb") as f:
        compressed = f.read(4) == ZSTD_MAGIC
    if compressed:
        import zstandard  # only a tree that writes .zst needs it, and has it

        with path.open("rb") as f, zstandard.ZstdDecompressor().stream_reader(f) as r:
            data = r.read()
    else:
        data = path.read_bytes()
    return sum(1 for line in data.splitlines() if b'"request_submit"' in line)


@contextlib.contextmanager
def counted_runs(counts: list[int] | None, write: bool | None = None) -> Iterator[None]:
    """Every run through `pool.run_one` meanwhile appends its `request_submit` count to
    `counts` (None: counts nothing, the runs' readers untouched); `write` (when not None)
    overrides whether a trace file is written."""
    from harness.studies.reproduce import pool

    original = pool.run_one

    def run_one(cfg: Any, path: Path, reader: Any = None, *args: Any, **kwargs: Any) -> Any:
        if write is not None:
            kwargs["write"] = write
        if counts is None:
            return original(cfg, path, reader, *args, **kwargs)
        if reader is None:
            from harness.core.metrics import ROUND_METRIC_EVENTS, round_metrics
            inner, kinds = round_metrics, frozenset(ROUND_METRIC_EVENTS)
        else:
            inner, kinds = reader, getattr(reader, "kinds", None)

        def counting(events: list[dict[str, Any]]) -> Any:
            counts.append(sum(1 for e in events if e["ev"] == "request_submit"))
            if kinds is None:
                return inner(events)
            return inner([e for e in events if e["ev"] in kinds])

        if kinds is not None:
            counting.kinds = frozenset(kinds) | {"request_submit"}  # type: ignore[attr-defined]
        if getattr(reader, "also", None) is not None:  # kinds of some runs only (`reads`)
            counting.also = reader.also  # type: ignore[attr-defined,union-attr]
        return original(cfg, path, counting, *args, **kwargs)

    pool.run_one = run_one
    try:
        yield
    finally:
        pool.run_one = original


def timed(work: Callable[[], Any]) -> dict[str, float]:
    """Process CPU and wall seconds of `work()`."""
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}


def rolloutpipe() -> Any:
    """RolloutPipe's runs module, wherever this tree keeps it."""
    import harness

    root = Path(harness.__file__).parent
    if (root / "studies" / "reproduce" / "rolloutpipe").is_dir():
        from harness.studies.reproduce.rolloutpipe import runs
        return runs
    from harness.studies.reproduce import rolloutpipe  # type: ignore[no-redef]
    return rolloutpipe


def grid(step_model: str = "") -> dict[str, float]:
    """RolloutPipe's grid (4 workloads x 3 R x 4 systems and readings x 4 rounds) as
    `simulate` runs it outside `reproduce` (its traces written to a temporary folder);
    `step_model` (extras): every run on that step model. Requests are counted from the
    trace files once the clock has stopped: the runs' own readers go untouched (a tree
    that makes a written run's metrics as it goes decodes nothing to count from)."""
    rp = rolloutpipe()
    if step_model:
        plain = rp.base_config

        def config(seed: int, rounds: int) -> Any:
            cfg = plain(seed, rounds)
            cfg.sim.step_model = step_model
            return cfg
        rp.base_config = config
    with tempfile.TemporaryDirectory() as tmp:
        rp.simulate(rounds=1, seed=0, traces=Path(tmp) / "warm", progress=False,
                    workloads=("lsat-ar",), groups=(32,), priority=False)
        folder = Path(tmp) / "grid"
        out = timed(lambda: rp.simulate(rounds=4, seed=0, traces=folder, progress=False))
        traces = [path for path in folder.rglob("*.jsonl*") if path.is_file()]
        requests = sum(map(trace_requests, traces))
    return {**out, "requests": requests, "runs": len(traces)}


def verl() -> dict[str, float]:
    """verl-async's VERL_LABELS runs in the main reading, as `reproduce` runs them: no
    trace file, the summary read from the events in memory; their requests counted in a
    second pass, not timed (the module's docstring)."""
    from harness.studies.reproduce import verl_async
    from harness.studies.reproduce.verl_async import runs

    every = runs.runs
    runs.READINGS = runs.READINGS[:1]
    counts: list[int] = []
    with tempfile.TemporaryDirectory() as tmp, counted_runs(None, write=False):
        runs.runs = lambda seed: [r for r in every(seed) if r.label == "osp colocate 16 FSDP2"]
        warm = runs.with_lengths  # the warm-up: one small colocated run

        def small(run: Any, means: Any, folder: Path) -> Any:
            cfg = warm(run, means, folder)
            cfg.groups, cfg.rounds = 32, 1
            return cfg
        runs.with_lengths = small
        verl_async.simulate(0, Path(tmp) / "warm", progress=False)
        runs.with_lengths = warm
        runs.runs = lambda seed: [r for r in every(seed) if r.label in VERL_LABELS]
        out = timed(lambda: verl_async.simulate(0, Path(tmp) / "timed", progress=False))
    with tempfile.TemporaryDirectory() as tmp, counted_runs(counts, write=False):
        verl_async.simulate(0, Path(tmp), progress=False)
    return {**out, "requests": sum(counts), "runs": len(counts)}


def million(rounds: int) -> dict[str, float]:
    """verl-fully-async with 128 engines (512 H20s at TP 4, the 7B setup, the main
    reading's lengths), R 512 x K 16 a sync window, `rounds` windows (128: 1,048,576
    requests), run as `rolloutbench run` runs it (its trace written, in the tree's own
    form); the child's peak RSS in bytes."""
    from harness.run.execute import execute
    from harness.studies.reproduce import verl_async
    from harness.studies.reproduce.verl_async import runs

    reading = runs.READINGS[0]
    fitted = verl_async.lengths(reading)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = runs.fully_async(0, 512)
        cfg.rounds = rounds
        run = runs.Run("million", cfg, 128)
        cfg = verl_async.trainer(runs.with_lengths(
            run, {k: v[0] for k, v in fitted.items()}, Path(tmp)), fitted[128], reading)
        out = timed(lambda: execute(cfg, Path(tmp) / _trace_name()))
        written = sum(p.stat().st_size for p in Path(tmp).glob("trace*"))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    return {**out, "rss": rss, "trace_bytes": written, "engines": cfg.sim.rollout_engines,
            "requests": cfg.groups * cfg.group_size * cfg.rounds}


def _trace_name() -> str:
    """The trace a simulated `rolloutbench run` writes in this tree: trace.jsonl.zst since
    #36's traces, trace.jsonl before."""
    try:
        from harness.core.trace_io import trace_name
    except ImportError:
        return "trace.jsonl"
    return trace_name("sim")


def cli(*argv: str) -> dict[str, float]:
    """`rolloutbench ARGV` as a user runs it (the console script beside this Python: the
    tree's own `harness`, first on PYTHONPATH); its CPU seconds, its worker processes'
    included (reaped by the time it returns)."""
    subprocess.run([_rolloutbench(), *argv], check=True, stdout=subprocess.DEVNULL)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"cpu": used.ru_utime + used.ru_stime}


def _rolloutbench() -> str:
    return str(Path(sys.executable).parent / "rolloutbench")


def scaling() -> list[dict[str, float]]:
    """One run per (R, K): RolloutPipe's hardware, lsat-ar, CGP, two rounds (extras)."""
    rp = rolloutpipe()
    from harness.studies.reproduce import pool

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        pool.run_one(rp.base_config(0, 1).validate(), Path(tmp) / "warm.jsonl")
        for groups in (32, 96, 256):
            for k in (4, 8, 16):
                cfg = rp.base_config(0, 2)
                cfg.system, cfg.workload, cfg.groups, cfg.group_size = "cgp", "lsat-ar", \
                    groups, k
                trace = Path(tmp) / "r.jsonl"
                took = timed(lambda c=cfg, p=trace: pool.run_one(c.validate(), p))
                out.append({"R": groups, "K": k, **took, "requests": trace_requests(trace)})
    return out


def plan() -> dict[str, float]:
    """`plan --budget 500` on a RolloutPipe-sized recipe (R=96, K=8, two rounds; extras)."""
    argv = ["plan", "--model", "qwen3-1.7b", "--gpus", "8", "--gpu", "h100-sxm",
            "--workload", "lsat-ar", "-R", "96", "-K", "8", "-U", "2", "--rounds", "2",
            "--budget", "500", "--out", "plan"]
    start = time.perf_counter()
    subprocess.run([_rolloutbench(), *argv], check=False, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    rows = len(Path("plan", "plan.csv").read_text().splitlines()) - 1
    return {"wall": time.perf_counter() - start, "configurations": rows}


PROBES: dict[str, Callable[..., Any]] = {"grid": grid, "verl": verl, "scaling": scaling,
                                         "plan": plan}


def main(argv: list[str]) -> None:
    """`probe NAME [ARGS]`: run one probe, print its result as the last line (JSON)."""
    name, args = argv[0], argv[1:]
    if name == "million":
        result: Any = million(int(args[0]))
    elif name == "cli":
        result = cli(*args)
    else:
        result = PROBES[name](*args)
    sys.stdout.flush()
    print("\n" + json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
