"""What the compiled core costs against `SimEngine` on the same streams, in CPU time.

`python -m harness.sim.fastcore.bench [requests] [repeats]`: one stream of `requests`
(default 100,000) on 8 replicas, a batch cap of 256, three engines: `roofline`, Qwen2.5-7B
on H100 (TP 1) with a KV cache of 1M tokens; `preempt`, the same with 60k tokens
(preemption on most segments); `kernels`, the measured-kernel table a default run prices
by (verl-fully-async's Qwen3-1.7B, TP 2) with its cache (537k tokens). Each repeat times
the compiled core and the Python engine one after the other (interleaved, so a load on
the machine falls on both); the Python engine's time is the heap's run alone (its requests
and engines built before) and with that set-up. Before the repeats: the events of both are
compared (they must be equal), and the compile time is measured in fresh processes, first
with an empty numba cache, then with the cache it left.
Then `stepped`: the compiled replicas stepped on the heap against `SimEngine`s, a request
crossing the boundary at a time (`reference.closed_loop`: a tenth of the stream submitted at
its times, each return submitting the next; the `roofline` engine), whole runs timed.
Prints µs a request, median [min-max] over the repeats, and the ratios.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

from harness.core.config import RunConfig
from harness.shared.defaults import resolve_defaults
from harness.sim.calibration import resolve
from harness.sim.engine_spec import kv_capacity_tokens
from harness.sim.fastcore import Stream, simulate
from harness.sim.fastcore.reference import closed_loop, prepare, random_stream, run_python
from harness.sim.kernels.source import decode_model
from harness.sim.perf import DecodeModel, TableDecodeModel
from harness.sim.presets import load_hardware, load_model

ENGINES, MAX_RUNNING = 8, 256
_FIRST_CALL = ("import time; t = time.process_time(); import numpy as np; "
               "from harness.sim.fastcore import Stream, simulate; "
               "from harness.sim.perf import DecodeModel; "
               "simulate(Stream(np.zeros(1), np.zeros(1, dtype=np.int64), np.ones(1, "
               "dtype=np.int64), np.ones(1, dtype=np.int64), np.zeros(1, dtype=np.int64), 1),"
               " DecodeModel(0.01, 0, 0, 0, 0, 0), 10, 1); print(time.process_time() - t)")


def cases() -> dict[str, tuple[DecodeModel | TableDecodeModel, int]]:
    """name -> (step model, KV capacity in tokens)."""
    roofline = DecodeModel.build(load_hardware("h100-sxm"), load_model("qwen2.5-7b"), 1, 0.8,
                                 0.003, 0.6)
    cfg = RunConfig(system="verl-fully-async", workload="lsat-ar")
    resolve_defaults(cfg)
    tp = cfg.sim.rollout_tp
    return {"roofline": (roofline, 1_000_000), "preempt": (roofline, 60_000),
            "kernels": (decode_model(cfg.sim, resolve(cfg.sim), tp), kv_capacity_tokens(cfg, tp))}


def compile_seconds() -> tuple[float, float]:
    """CPU seconds of a fresh process's import and first call: an empty cache, then the
    cache that run wrote."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        cold, warm = (float(subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env,
                                           check=True, capture_output=True,
                                           text=True).stdout) for _ in range(2))
    return cold, warm


def once(s: Stream, d: DecodeModel | TableDecodeModel,
         capacity: int) -> tuple[float, float, float]:
    """CPU seconds: the compiled core; the Python engine's run; its set-up and run."""
    t0 = time.process_time()
    simulate(s, d, capacity, MAX_RUNNING)
    t1 = time.process_time()
    heap, _, _ = prepare(s, d, capacity, MAX_RUNNING)
    t2 = time.process_time()
    heap.run()
    t3 = time.process_time()
    return t1 - t0, t3 - t2, t3 - t1


def stepped(s: Stream, d: DecodeModel | TableDecodeModel, capacity: int) -> tuple[float, float]:
    """CPU seconds of a closed loop: the core stepped on the heap; `SimEngine`s."""
    roots = len(s.submit_t) // 10
    t0 = time.process_time()
    closed_loop(s, roots, d, capacity, MAX_RUNNING, True)
    t1 = time.process_time()
    closed_loop(s, roots, d, capacity, MAX_RUNNING, False)
    return t1 - t0, time.process_time() - t1


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3g} [{min(values):.3g}-{max(values):.3g}]"


def main(n: int = 100_000, repeats: int = 5) -> None:
    cold, warm = compile_seconds()
    print(f"first call in a fresh process (import + compile or load): cold cache {cold:.2f} "
          f"CPU s, warm cache {warm:.2f} CPU s")
    s = random_stream(7, n, ENGINES, rate=20.0)
    engines = cases()
    for name, (d, capacity) in engines.items():
        fast = simulate(s, d, capacity, MAX_RUNNING)
        same = fast.rows() == run_python(s, d, capacity, MAX_RUNNING).rows()
        print(f"{name}: {len(fast.t):,} events, {fast.preemptions:,} preemptions, "
              f"makespan {fast.t.max():.6f} s, same events as SimEngine: {same}")
    times: dict[str, list[tuple[float, float, float]]] = {name: [] for name in engines}
    for _ in range(repeats):
        for name, (d, capacity) in engines.items():
            times[name].append(once(s, d, capacity))
    print(f"\nµs a request, CPU, {repeats} interleaved repeats, median [min-max]")
    print("| engine | compiled | SimEngine run | SimEngine set-up + run | ratio run "
          "| ratio with set-up |")
    print("|---|---|---|---|---|---|")
    for name, rows in times.items():
        fast_us = [r[0] / n * 1e6 for r in rows]
        run_us = [r[1] / n * 1e6 for r in rows]
        all_us = [r[2] / n * 1e6 for r in rows]
        print(f"| {name} | {spread(fast_us)} | {spread(run_us)} | {spread(all_us)} | "
              f"{spread([r[1] / r[0] for r in rows])} | {spread([r[2] / r[0] for r in rows])} |")
    d, capacity = engines["roofline"]
    closed_loop(random_stream(1, 100, ENGINES), 10, d, capacity, MAX_RUNNING, True)  # loaded
    loops = [stepped(s, d, capacity) for _ in range(repeats)]
    print(f"| stepped (a request a crossing) | {spread([a / n * 1e6 for a, _ in loops])} | - | "
          f"{spread([b / n * 1e6 for _, b in loops])} | - | {spread([b / a for a, b in loops])} |")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
