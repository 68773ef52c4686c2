"""The compiled pool's request events as Structs (harness/sim/trace_events.py) are the
dicts `record` builds: the same bytes written, the same dicts held for a reader; and the
writer's calls for events at their own times (`record_at`, `record_many`) write what
`record` writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import asdict

from harness.sim import trace_events as te
from harness.sim.trace_buffer import BufferedTraceWriter

# one event of each class: its kind and fields as `record_at` is handed them; a time
# that is a Python int stays one (round leaves it), a float is rounded to 6 decimals
EVENTS: list[tuple[Any, float, str, dict[str, Any]]] = [
    (te.RequestSubmit, 0, "request_submit",
     {"round": 0, "group": 3, "sample": 1, "prompt_tokens": 250, "resumed_tokens": 0,
      "engine": 0}),
    (te.RequestSubmitPrompt, 0.1 + 0.2, "request_submit",
     {"round": 1, "group": 4, "sample": 0, "prompt_tokens": 90, "resumed_tokens": 0,
      "engine": 2, "prompt": 7}),
    (te.RequestAdmit, 1 / 3, "request_admit", {"group": 3, "sample": 1, "engine": 0}),
    (te.RequestPreempt, 2.0000005, "request_preempt", {"group": 3, "sample": 1}),
    (te.RequestRequeue, 1234567.8901234, "request_preempt",
     {"group": 3, "sample": 1, "reason": "recompute"}),
    (te.RequestFinish, 5.25, "request_finish",
     {"group": 3, "sample": 1, "response_tokens": 40, "status": "finished",
      "versions": [0, 1], "version_spans": [[0, 30], [1, 10]]}),
]


def structs() -> tuple[list[float], list[Any]]:
    made = [cls(t, ev, *fields.values()) for cls, t, ev, fields in EVENTS]
    return [s.t for s in made], made


def dicts(writer: BufferedTraceWriter) -> None:
    for _, t, ev, fields in EVENTS:
        writer.record_at(t, ev, **fields)


@pytest.mark.parametrize("pack", [1, 4, 1 << 14])
def test_structs_write_the_dicts_bytes(tmp_path: Path, pack: int,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(BufferedTraceWriter, "PACK", pack)
    as_dicts = BufferedTraceWriter(tmp_path / "dicts.jsonl", lambda: 0.0)
    dicts(as_dicts)
    as_structs = BufferedTraceWriter(tmp_path / "structs.jsonl", lambda: 0.0)
    as_structs.record_many(*structs())
    as_dicts.close()
    as_structs.close()
    written = (tmp_path / "structs.jsonl").read_bytes()
    assert written == (tmp_path / "dicts.jsonl").read_bytes()
    assert written.startswith(b'{"t":0,"ev":"request_submit","round":0,')  # an int time
    assert b'{"t":0.3,"ev":"request_submit",' in written  # rounded
    assert b',"engine":2,"prompt":7}\n' in written
    assert as_structs.events() == as_dicts.events()


def test_held_structs_are_handed_as_dicts(tmp_path: Path) -> None:
    """A memory-only run holds its events as a reader gets them: dicts, not Structs."""
    held = BufferedTraceWriter(tmp_path / "held", lambda: 0.0, write=False)
    held.record_many(*structs())
    written = BufferedTraceWriter(tmp_path / "w.jsonl", lambda: 0.0)
    dicts(written)
    got = held.events()
    assert held._dicts[0] is not None  # noqa: SLF001  (held, not packed)
    assert all(type(event) is dict for event in got)
    assert got == written.events()
    assert [list(e) for e in got] == [list(e) for e in written.events()]  # key order
    assert type(got[0]["t"]) is int
    written.close()


@pytest.mark.parametrize("written", [True, False])
def test_both_makers_make_the_same_events(tmp_path: Path, written: bool) -> None:
    """`Makers.of(False)` (a memory-only run's dicts) makes, call for call, what the
    Structs of `Makers.of(True)` encode as: the same keys in the same order and the same
    lines, held or written."""
    made: dict[bool, list[Any]] = {}
    for dicts_or_structs in (True, False):
        make = te.Makers.of(dicts_or_structs)
        by_class = {te.RequestSubmit: make.submit, te.RequestSubmitPrompt: make.submit_prompt,
                    te.RequestAdmit: make.admit, te.RequestPreempt: make.preempt,
                    te.RequestRequeue: make.requeue, te.RequestFinish: make.finish}
        made[dicts_or_structs] = [by_class[cls](t, ev, *fields.values())
                                  for cls, t, ev, fields in EVENTS]
        assert [make.time(e) for e in made[dicts_or_structs]] == [t for _, t, _, _ in EVENTS]
    assert all(type(e) is dict for e in made[False])
    assert [list(e) for e in made[False]] == [list(asdict(s)) for s in made[True]]
    writers = {}
    for kind, events in made.items():
        writer = BufferedTraceWriter(tmp_path / f"{kind}.jsonl", lambda: 0.0, write=written)
        writer.record_many([te.Makers.of(kind).time(e) for e in events], events)
        writers[kind] = writer
    assert writers[True].events() == writers[False].events()
    if written:
        for writer in writers.values():
            writer.close()
        assert (tmp_path / "True.jsonl").read_bytes() == (tmp_path / "False.jsonl").read_bytes()


def test_record_at_writes_what_record_writes_at_that_clock(tmp_path: Path) -> None:
    now = [0.0]
    a = BufferedTraceWriter(tmp_path / "a.jsonl", lambda: now[0])
    b = BufferedTraceWriter(tmp_path / "b.jsonl", lambda: 0.0)
    for t in (0.1 + 0.2, 1 / 3, 2.0000005, 1234567.8901234):
        now[0] = t
        a.record("request_admit", group=1, sample=2, engine=0)
        b.record_at(t, "request_admit", group=1, sample=2, engine=0)
    a.close()
    b.close()
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert b"0.3," in (tmp_path / "b.jsonl").read_bytes()  # rounded to 6 decimals


def test_record_many_packs_at_the_same_events_as_one_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(BufferedTraceWriter, "PACK", 4)  # a frame every 4 events
    one = BufferedTraceWriter(tmp_path / "one.jsonl.zst", lambda: 0.0)
    many = BufferedTraceWriter(tmp_path / "many.jsonl.zst", lambda: 0.0)
    times = [k / 7 for k in range(11)]
    for t in times:
        one.record_at(t, "request_admit", group=1, sample=2, engine=0)
    for lo in range(0, 11, 3):  # 3, 3, 3, 2: across the frames' edges
        chunk = times[lo:lo + 3]
        many.record_many(chunk, [{"t": t, "ev": "request_admit", "group": 1, "sample": 2,
                                  "engine": 0} for t in chunk])
    assert len(many._frames) == len(one._frames) == 2  # 4 + 4 packed, 3 in the tail
    one.close()
    many.close()
    assert (tmp_path / "one.jsonl.zst").read_bytes() == (tmp_path / "many.jsonl.zst").read_bytes()
