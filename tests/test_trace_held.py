"""Events held as dicts equal the events decoded from their lines.

`BufferedTraceWriter` holds its packs' events (up to `HELD` of them) as a reader gets
them, so that `events` and `replay` need not decode lines (and a memory-only run makes
none). What they hand a reader must be what decoding the lines gives: the same values,
types and key order, times rounded to 6 decimals. The reference packs every event as it
is recorded (PACK 1, HELD 0): its lines are made at once, so a field changed after its
event was recorded would show as a difference, as would a tuple, a NaN or an int key
held as it came.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from harness.shared.defaults import resolve_defaults
from harness.sim.runtime import SimRuntime
from harness.sim.trace_buffer import BufferedTraceWriter
from systems import checked_names, get_system
from tests.test_golden import golden_config

SUBSET = frozenset({"run_start", "request_finish", "group_materialized", "optimizer_step",
                    "decision", "run_end"})




def read(system: str, held: int, pack: int, monkeypatch: pytest.MonkeyPatch,
         path: str = os.devnull, let_go: int = 1 << 21) -> dict[str, Any]:
    """One run of `system` with HELD `held`, PACK `pack` and LET_GO `let_go` (its trace
    written to `path` unless it is os.devnull): what its readers get of every kind and of
    SUBSET, from `events` and from `replay` (two passes), and which packs were held."""
    monkeypatch.setattr(BufferedTraceWriter, "HELD", held)
    monkeypatch.setattr(BufferedTraceWriter, "PACK", pack)
    monkeypatch.setattr(BufferedTraceWriter, "LET_GO", let_go)
    runtime = SimRuntime(resolve_defaults(golden_config(system)), path, path != os.devnull)
    runtime.run(get_system(system))
    replayed = runtime.replay(SUBSET)
    writer = runtime._writer  # noqa: SLF001  (closed by the run's end)
    return {"all": runtime.events(), "subset": runtime.events(SUBSET),
            "replay": list(runtime.replay()), "replay subset": [list(replayed), list(replayed)],
            "first": runtime.replay()[0], "recorded": runtime.recorded(),
            "held": [d is not None for d in writer._dicts]}  # noqa: SLF001


@pytest.mark.parametrize("engines", ["python", "compiled"])
@pytest.mark.parametrize("system", checked_names())
def test_held_events_are_the_decoded_lines(system: str, engines: str,
                                           monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    """Every system, on the Python engines and where it is eligible on the compiled pool
    (whose events come through `record_at` and `record_many`)."""
    monkeypatch.setenv("ROLLOUTBENCH_PYTHON_ENGINES", "1" if engines == "python" else "0")
    packed = read(system, 0, 1, monkeypatch)  # every event encoded as it is recorded
    assert not any(packed.pop("held"))
    n = packed["recorded"]
    assert n == len(packed["all"]) > 200 and packed["first"]["ev"] == "run_start"
    runs = {"held": read(system, 1 << 20, 64, monkeypatch),  # every event held
            "over": read(system, 200, 64, monkeypatch),  # held till 200 events
            "let go": read(system, 200, 64, monkeypatch, let_go=300),  # packed past 300
            "written": read(system, 1 << 20, 64, monkeypatch, str(tmp_path / "a.jsonl.zst"))}
    # (a written run holds nothing: its readers decode the lines, as before)
    assert all(runs["held"].pop("held")) and not any(runs["written"].pop("held"))
    over = runs["over"].pop("held")  # 3 packs (192 events) held, the rest not
    assert over[:3] == [True] * 3 and not any(over[3:])
    assert not any(runs["let go"].pop("held"))  # the 3 packed past 300 events
    for name, got in runs.items():
        for what, want in packed.items():
            # repr: the types too (1 vs 1.0, list vs tuple), key order, NaN-safe
            assert repr(got[what]) == repr(want), f"{system}, {name}: {what}"


def test_kinds_that_may_hold_what_json_changes_are_decoded(tmp_path: Path) -> None:
    """A tuple, a NaN, an int key or a time given as a field, of a kind not held as
    recorded, come back as their line decodes: a list, None, a string key, the field."""
    times = iter([0.5, 1.0000004, 2.0, 2.5, 3.0]).__next__
    writer = BufferedTraceWriter(tmp_path / "a.jsonl", times, write=False)
    writer.record("run_start", config={"groups": (32, 64), "by": {1: 2.0}})
    writer.record("optimizer_step", step=1, ess=float("nan"), spans=[(1, 2)])
    writer.record("decision", t=7, what="x")
    writer.record("request_finish", group=1, sample=0, versions=[1, 2])
    writer.record("group_complete", group=1, round=0)
    assert writer.events() == [
        {"t": 0.5, "ev": "run_start", "config": {"groups": [32, 64], "by": {"1": 2.0}}},
        {"t": 1.0, "ev": "optimizer_step", "step": 1, "ess": None, "spans": [[1, 2]]},
        {"t": 7, "ev": "decision", "what": "x"},
        {"t": 2.5, "ev": "request_finish", "group": 1, "sample": 0, "versions": [1, 2]},
        {"t": 3.0, "ev": "group_complete", "group": 1, "round": 0}]
    assert writer._dicts[0] is not None and writer._frames == [None]  # noqa: SLF001
    assert not (tmp_path / "a.jsonl").exists()


def test_a_written_run_leaves_its_requests_to_reference_counting(tmp_path: Path) -> None:
    """A written run's round metrics (a key and a value per request) are let go with the
    writer's tap when the run ends, so they are freed as `execute` returns: the cyclic
    collector then finds the run's few objects in cycles, not two a request (at 1M
    requests, a collection of a second)."""
    import gc

    from harness.run.execute import execute

    cfg = golden_config("verl-fully-async")
    cfg.groups, cfg.group_size, cfg.rounds = 64, 16, 4  # 4,096 requests
    cfg = cfg.validate()
    gc.collect()
    gc.disable()
    try:
        execute(cfg, tmp_path / "trace.jsonl.zst")
        left = gc.collect()
    finally:
        gc.enable()
    assert left < 1_000  # each request's submission kept by the metrics: 8,192 more
