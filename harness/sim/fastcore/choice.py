"""Which runs the compiled pool serves (harness/sim/fastcore/pool.py), decided from the
configuration before the run; every other run keeps `EnginePool` over `SimEngine`s.

The compiled engines have submissions (admission, segments, preemption by recomputation,
a request's end: harness/sim/fastcore/timeline.py), a colocated placement's turns on the
GPUs with the trainer (`GpuShare`: harness/sim/fastcore/share.py) and the pool-wide calls
(control.py: pause keep or abort, resume, a weight install with requests in flight, a
request resumed from its tokens), which the pool makes as `EnginePool` makes them
(inflight.py). So a run goes on the core only if nothing in it asks for more:

- a system from `CORE_SYSTEMS`: those whose engine calls are `serve`, `submit`, a publish
  between rollouts (slime, cgp, cgp-fgd, verl, verl-one-step-off; colocated too: no
  request waits for the GPUs while they publish, so the share never wakes a replica then),
  verl-fully-async's sync (pause with abort in flight, publish while paused, resume,
  the aborted responses sent again with their tokens; not colocated: a share's wake while
  paused is not compared with the Python path), and an abort of some requests in flight
  (`engine.abort`: APRIL's and cgp-april's end of a rollout, slime-async's interrupted
  attempts; APRIL's reproduction is colocated), the asynchronous systems the core
  runs faster (skyrl-async, nemo-rl-async, sortedrl: a resumed request is one compiled
  call), and areal (its groups pass its open gate whole: `serve_group`, the gate told of
  each return the core takes). Every other system stays off: `SAME_NOT_FASTER` (their
  traces are the same bytes on the core, but the runs are not faster: each request they
  send crosses into the core alone, a turn of the core a return), pipelinerl (its
  `on_response` schedules on the heap, which a group the core serves forbids), seer's
  chunks, resizes (rollpacker, cgp-tail: RollPacker's runs that resize nothing are the
  same bytes on the core but no faster there, four of its eta runs held in memory
  1.57-1.66 against 1.39-1.69 CPU s: its `keep` serve and its queued checks cost the
  time, each return and check Python's), lent replicas
  (verl-dynamic), drafting (tlt), laminar's relay pulls; a plugin the core knows nothing
  of;
- no speculative decoding or grouped drafting (`sim.spec_drafter`), no `would-need` probe
  (its knobs wrap the step model). A verifier worker pool (`sim.verifier_workers`) is
  no bar: its checks wait for a worker in Python (`_Queued`), so `serve` sends such a
  group with one `submit_many` rather than `serve_group`, and each return is Python's,
  as on `EnginePool`: the same bytes for every system here, with 1 and 3 workers;
  RollPacker's veRL runs (64 and 128 workers) 1.3-1.4x faster;
- a step model of exactly `DecodeModel` or `TableDecodeModel`, or an eager step over one
  (`sim.engine_eager`: `EagerStep`, whose bisection the core takes as it does); anything
  else that wraps them (speculation, overheads, probes) is priced by its own formula; a
  table's batches within the core's cap;
- numba installed, and `ROLLOUTBENCH_PYTHON_ENGINES` unset (or "0"): set, it keeps every
  run on the Python path (the tests and the bench compare the two).

Nothing here imports numba: the live runtime and the CLI import this module's callers.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

# Systems whose every engine call the compiled pool has (see the module's docstring).
# april, cgp-april and slime-async: CPU per run against `SimEngine`s, R 256 x K 16, 6
# rounds, dapo-math-17k, one engine: 1.51x, 1.88x, 1.54x (docs/simulated-core.md).
# skyrl-async, nemo-rl-async and sortedrl (R 64 x K 8, 4 rounds): 1.19x, 1.16x, 1.11x
# once a resumed request crossed in one compiled call and the hot calls skipped numba's
# dispatcher (9 pairs). areal: its reproduction's 47 runs of its own system 60.3
# [59.4-62.7] -> 31.2 [30.2-34.6] CPU s, 1.90x [1.81-2.00] (3 pairs), once its groups
# went to the core whole through its open gate (harness/sim/serve.py).
CORE_SYSTEMS = frozenset({"slime", "cgp", "cgp-fgd", "verl", "verl-one-step-off",
                          "verl-fully-async", "april", "cgp-april", "slime-async",
                          "skyrl-async", "nemo-rl-async", "sortedrl", "areal"})
# Byte for byte the same on the core (goldens, the regress grid's cells, variants with
# preemption, other routers, colocated), and not faster there, so kept off: the same run
# 0.87x (prime-rl) to 1.05x (tinker), 9 interleaved pairs. Measured, not refused: a change
# that makes them faster moves them above.
SAME_NOT_FASTER = frozenset({"prime-rl", "roll-flash", "tinker"})
FORCE_PYTHON = "ROLLOUTBENCH_PYTHON_ENGINES"  # set (not "0"): every run on SimEngines
MAX_BATCH_TABLE = 1 << 16  # a table's coefficients are kept for every batch up to the cap


def config_refusal(cfg: Any, probed: bool) -> str | None:
    """Why this run stays on the Python path (None: the config allows the core);
    `probed`: a `would-need` probe's knobs apply."""
    s = cfg.sim
    if os.environ.get(FORCE_PYTHON, "0") not in ("", "0"):
        return f"{FORCE_PYTHON} is set"
    if cfg.system in SAME_NOT_FASTER:
        return f"system {cfg.system} is no faster on the core"
    if cfg.system not in CORE_SYSTEMS:
        return f"system {cfg.system} calls what the core does not have"
    for why, refused in (("a colocated verl-fully-async",
                          s.placement == "colocated" and cfg.system == "verl-fully-async"),
                         ("speculative decoding", s.spec_drafter != "off"),
                         ("a would-need probe", probed)):
        if refused:
            return why
    if importlib.util.find_spec("numba") is None:  # looked for, not imported
        return "numba is not installed"
    return None


def kernels_of(decode: Any) -> Any:
    """The model whose formula the core takes: an eager step's wrapped kernels (the core
    adds the eager terms around them, harness/sim/fastcore/stepmodel.py), else `decode`."""
    from harness.sim.kernels.eager import EagerStep

    return decode.kernels if type(decode) is EagerStep else decode


def priced(decode: object) -> bool:
    """Whether the compiled functions price `decode`: a `DecodeModel` or a
    `TableDecodeModel` exactly, or an `EagerStep` over one of them; anything else that
    wraps or subclasses them (speculation, grouped drafting, a probe's knobs) has a formula
    of its own."""
    from harness.sim.perf import DecodeModel, TableDecodeModel

    kind = type(kernels_of(decode))
    return kind is DecodeModel or kind is TableDecodeModel


def past_table(decode: Any, max_running: int) -> bool:
    """Whether a table's batches up to `max_running` are more than the core keeps."""
    from harness.sim.perf import TableDecodeModel

    return type(kernels_of(decode)) is TableDecodeModel and max_running > MAX_BATCH_TABLE


def decode_refusal(decode: Any, max_running: int) -> str | None:
    """Why this step model stays on the Python path (None: the core prices it)."""
    if not priced(decode):
        return f"a step model of {type(decode).__name__}"
    if past_table(decode, max_running):
        return f"max_running {max_running} past the core's table"
    return None
