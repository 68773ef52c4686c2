"""Compile the core once, so that a run loads it from the cache: `python -m
harness.sim.fastcore.warm` (`make setup` calls it).

A fresh process with an empty cache spends about 10 CPU s compiling; with the cache
about 0.7 s (importing numba and loading). The cold compile belongs to the set-up, not to
`make reproduce`'s 30 s. Tiny inputs go through the entry points, `simulate` (the whole
stream at once), `SteppedEngines` (requests from the heap's callbacks, arrays from one
row so that every growth path and the run stack's compaction run), the replicas'
pool-wide calls (control.py, through scripts.py's `PinnedPool`) and simulated runs of
slime and of verl colocated (the runtime's own use of the core), with the argument types a
run passes, so each function is compiled for the signature a run asks for. Then
every compiled function of the package must have been compiled or loaded here (a callee
loaded inside its cached caller counts by its cache file): a function added to the core
but not reached here is named and the exit code is 1, as is one decorated with numba's own
`njit` (its cache elsewhere: harness/sim/fastcore/cachedir.py says why). Older versions'
caches beside this one are removed.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import harness.sim.fastcore as fastcore
from harness.core.config import RunConfig
from harness.shared.defaults import resolve_defaults
from harness.sim.fastcore import Stream, simulate
from harness.sim.fastcore.reference import closed_loop, random_stream
from harness.sim.perf import DecodeModel, TableDecodeModel
from harness.sim.runtime import SimRuntime
from systems import get_system

SKIP = frozenset({"bench", "control_bench", "warm"})  # modules that only drive the core


def models() -> list[DecodeModel | TableDecodeModel]:
    """The two step models the core prices by (their parameters are one float array, so
    one signature serves both; both are run as a run would)."""
    roofline = DecodeModel(0.002, 1e-5, 0.004, 1e-8, 1e-5, 1e-6)
    table = TableDecodeModel((1, 4), (0.004, 0.005), (1e-8, 2e-8), 1e-6)
    return [roofline, table]


def run_once() -> None:
    """Both entry points on tiny streams that preempt (a KV cache of a few prompts)."""
    stream = random_stream(11, 48, 2, rate=200.0, prompt=(8, 32), target=(1, 24))
    for decode in models():
        simulate(stream, decode, 96, 8)
        closed_loop(stream, 12, decode, 96, 8, True, room=1)
    # an empty stream takes the same path (no engine has work)
    empty = np.zeros(0, dtype=np.int64)
    simulate(Stream(np.zeros(0), empty, empty, empty, empty, 1), models()[0], 96, 8)


def run_one_by_one() -> None:
    """The pool's crossing a request at a time (`engine.submit`, verl's synchronous rollout
    calls it) and a resumed one, which a run of slime, served a group at a time, never
    reaches."""
    from harness.sim.fastcore.crossing import LeanEngines
    from harness.sim.heap import Heap

    for decode in models():
        heap = Heap()
        lean = LeanEngines(heap, decode, 96, 8, 1, lambda _i: None, room=1)
        lean.sink = lambda: None
        for _ in range(3):
            lean.submit(0, 0, 8, 4)
        lean.submit_resumed(0, 0, 8, 6, 2, [[0, 2]])  # a resumed one (verl-fully-async's)
        lean.submit_resumed(0, 0, 8, 6, 2, [[0, 1], [1, 1]])
        heap.run()


def run_controls() -> None:
    """The replicas' pool-wide calls (control.py), each at least once, through
    `PinnedPool` (harness/sim/fastcore/scripts.py), and responses read as columns."""
    from harness.sim.fastcore.scripts import Script, run_script

    stream = random_stream(11, 24, 2, rate=200.0, prompt=(8, 32), target=(8, 24))
    calls = ((0.01, "abort", ("0.0", "1.0", "5.0")), (0.02, "keep", None),
             (0.03, "resume", None), (0.04, "drain", None), (0.05, "resume", None),
             (0.06, "install", (1, 0.01)), (0.08, "install-recompute", (2, 0.01)),
             (0.1, "abort-all", None), (0.2, "resume", None))
    for decode in models():
        pools: list[Any] = []
        run_script(Script(stream, 12, calls), decode, 96, 8, True, room=1, pools=pools)
        core = pools[0].core
        core.outcomes(range(core.n))


def run_a_system() -> None:
    """Tiny simulated runs of slime and of verl colocated (two rounds: the GPUs handed
    back to the engine, harness/sim/fastcore/share.py), which the runtime's compiled pool
    serves where it has one: what the runtime's crossing calls is compiled with the types
    a run passes."""
    os.environ.pop("ROLLOUTBENCH_PYTHON_ENGINES", None)  # the test suite's Python-only switch
    for system, rounds in (("slime", 1), ("verl", 2)):
        cfg = RunConfig(system=system, workload="lsat-ar", groups=2, update_groups=1,
                        rounds=rounds, group_size=2, seed=0)
        if system == "verl":  # its own hand-over, sync and trainer: no note on their prices
            cfg.sim.placement, cfg.sim.switch_s = "colocated", 0.5
            cfg.sim.weight_sync_s, cfg.sim.train_scale = 0.5, 1.0
        resolve_defaults(cfg.validate())  # as harness.run.execute does (a layer above)
        with tempfile.TemporaryDirectory() as tmp:
            SimRuntime(cfg, Path(tmp) / "trace.jsonl.zst", True, None).run(
                get_system(cfg.system))


def run_a_trainer() -> None:
    """The kernel trainer's pricing (pricing.py), as a run on the compiled pool prices a
    train call: the module loaded, `micro_time` calls it."""
    import harness.sim.fastcore.pricing  # noqa: F401  (what trainer/pricer.py looks for)
    from harness.sim.presets import load_hardware, load_model
    from harness.sim.trainer.layout import Layout
    from harness.sim.trainer.step import KernelTrainModel

    trainer = KernelTrainModel("h20", load_hardware("h20"), load_model("qwen3-1.7b"),
                               Layout(4, tp=2))
    trainer.micro_time([3000, 200, 100])


def dispatchers() -> dict[str, Any]:
    """'module.function' -> numba dispatcher, for every compiled function of the package."""
    from numba.core.dispatcher import Dispatcher

    found: dict[str, Any] = {}
    for info in pkgutil.iter_modules(fastcore.__path__):
        if info.name in SKIP:
            continue
        module = importlib.import_module(f"{fastcore.__name__}.{info.name}")
        for name, value in vars(module).items():
            if isinstance(value, Dispatcher) and value.py_func.__module__ == module.__name__:
                found[f"{info.name}.{name}"] = value
    return found


def missing() -> list[str]:
    """Compiled functions neither compiled nor loaded in this process nor in the cache."""
    out = []
    for key, disp in sorted(dispatchers().items()):
        if disp.signatures:
            continue
        path = disp.stats.cache_path
        qualname = disp.py_func.__qualname__
        module = Path(disp.py_func.__code__.co_filename).stem
        if not path or not list(Path(path).glob(f"{module}.{qualname}-*.nbi")):
            out.append(key)
    return out


def outside(cache: Path) -> list[str]:
    """Compiled functions whose cache is not in `cache`: decorated with numba's own `njit`,
    not harness.sim.fastcore.jit's (numba would then check them against their own file
    only, and `make setup` would not have warmed what a run loads)."""
    return sorted(key for key, disp in dispatchers().items()
                  if not Path(disp.stats.cache_path or "/").is_relative_to(cache))


def main() -> int:
    from harness.sim.fastcore.cachedir import prune
    from harness.sim.fastcore.jit import CACHE

    t0 = time.process_time()
    run_once()
    run_one_by_one()
    run_controls()
    run_a_system()
    run_a_trainer()
    seconds = time.process_time() - t0
    found = dispatchers().values()
    compiled = sum(1 for d in found if d.stats.cache_misses)
    loaded = sum(1 for d in found if d.stats.cache_hits and not d.stats.cache_misses)
    problems = [("not compiled by the warm-up", missing())]
    if CACHE is not None:
        prune(CACHE)
        problems.append((f"not cached in {CACHE} (numba's njit, not fastcore.jit's)",
                         outside(CACHE)))
    where = CACHE if CACHE is not None else "none, no writable folder"
    print(f"compiled core: ready in {seconds:.1f} CPU s, {compiled} functions compiled, "
          f"{loaded} loaded (numba cache: {where})")
    for what, names in problems:
        if names:
            print(f"compiled core: {what}: {', '.join(names)}", file=sys.stderr)
    return 1 if any(names for _, names in problems) else 0


if __name__ == "__main__":
    raise SystemExit(main())
