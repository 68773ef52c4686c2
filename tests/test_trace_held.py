"""A memory-only run's events held as dicts equal the events decoded from its lines.

`BufferedTraceWriter(write=False)` holds its packs' dicts (up to `HELD` events) instead of
encoding, compressing and decoding them again. What `events` and `replay` hand a reader
must be what they were when every pack was packed: the same values, types and key order,
times rounded to 6 decimals. The packed reference here packs every event as it is
recorded (PACK 1): its lines are read at once, so a field changed after its event was
recorded (or a tuple, a NaN, an int key) would show as a difference.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from harness.core.config import RunConfig
from harness.shared.defaults import resolve_defaults
from harness.sim.runtime import SimRuntime
from harness.sim.trace_buffer import BufferedTraceWriter
from systems import checked_names, get_system

SUBSET = frozenset({"run_start", "request_finish", "group_materialized", "optimizer_step",
                    "decision", "run_end"})


def golden_config(system: str) -> RunConfig:
    """tests/test_golden.py's configuration of `system`."""
    cfg = RunConfig(system=system, workload="sci-jl", groups=8, rounds=2, seed=7)
    if system == "seer":
        cfg.seer.chunk_tokens = 2048
    if system == "tlt":
        cfg.sim.spec_acceptance_decay, cfg.tlt.training_interval_steps = 0.05, 1
        cfg.tlt.drafter_steps = 0
    return cfg.validate()


def read(system: str, held: int, pack: int,
         monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """One memory-only run of `system` with HELD `held` and PACK `pack`: what its readers
    get of every kind and of SUBSET, from `events` and from `replay` (two passes)."""
    monkeypatch.setattr(BufferedTraceWriter, "HELD", held)
    monkeypatch.setattr(BufferedTraceWriter, "PACK", pack)
    runtime = SimRuntime(resolve_defaults(golden_config(system)), os.devnull, write=False)
    runtime.run(get_system(system))
    replayed = runtime.replay(SUBSET)
    return {"all": runtime.events(), "subset": runtime.events(SUBSET),
            "replay": list(runtime.replay()), "replay subset": [list(replayed), list(replayed)],
            "first": runtime.replay()[0], "recorded": runtime.recorded(),
            "packs": [type(p).__name__ for p in runtime._writer._frames]}  # noqa: SLF001


@pytest.mark.parametrize("system", checked_names())
def test_held_events_are_the_decoded_lines(system: str, monkeypatch: pytest.MonkeyPatch) -> None:
    packed = read(system, 0, 1, monkeypatch)  # every event encoded as it is recorded
    held = read(system, 1 << 20, 64, monkeypatch)  # every event held
    over = read(system, 200, 64, monkeypatch)  # held till 200 events, then packed
    assert set(packed.pop("packs")) == {"bytes"} and set(held.pop("packs")) == {"list"}
    assert over.pop("packs")[0] == "bytes"  # the first held packs were packed at 200
    n = packed["recorded"]
    assert n == len(packed["all"]) > 200 and packed["first"]["ev"] == "run_start"
    for got in (held, over):
        for name, want in packed.items():
            # repr: the types too (1 vs 1.0, list vs tuple), key order, NaN-safe
            assert repr(got[name]) == repr(want), f"{system}: {name}"
